/* Unit tests of runtime/state.c's host-call queue with no GPU: threads of
 * this test play the driver's, calling the trampoline as cuLaunchHostFunc
 * would, and the main thread runs the Lua functions. Checks that every function runs on
 * the main thread, that a driver thread returns at once without waiting
 * for its function (waiting deadlocked with the driver's locks), that an
 * error is handed to the servicing call after every posted function ran,
 * and that shutting down drops what is queued without running Lua.
 * The queue loads no driver, so the runtime links here without one.
 * spec/host_callback_spec.lua runs it. */
#include "runtime/runtime.h"

#include <lualib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static int checks, failures;
#define CHECK(condition)                                                     \
    do {                                                                     \
        checks++;                                                            \
        if (!(condition)) {                                                  \
            failures++;                                                      \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #condition); \
        }                                                                    \
    } while (0)

static pthread_t main_thread;
static volatile int returned[8];

struct driver_thread {
    struct gpurun_host_call *call;
    int index;
};

static void *driver(void *data)
{
    struct driver_thread *self = data;
    gpurun_host_call_trampoline(self->call);
    returned[self->index] = 1;
    return NULL;
}

static int record_thread(lua_State *L)
{
    lua_pushboolean(L, pthread_equal(pthread_self(), main_thread));
    lua_setglobal(L, "on_main");
    lua_getglobal(L, "runs");
    lua_pushinteger(L, lua_tointeger(L, -1) + 1);
    lua_setglobal(L, "runs");
    return 0;
}

static int service_until(lua_State *L, int wanted)
{
    int ran = 0;
    for (int spins = 0; ran < wanted && spins < 2000; spins++) {
        int failed;
        ran += gpurun_host_calls_run(L, &failed);
        CHECK(failed == 0);
        if (ran < wanted)
            gpurun_host_calls_await(1000000);
    }
    return ran;
}

int main(void)
{
    main_thread = pthread_self();
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    lua_pushinteger(L, 0);
    lua_setglobal(L, "runs");

    /* One call, one run: the driver's thread posts and returns; the main
     * thread runs it when it services. */
    struct gpurun_host_call call;
    gpurun_host_call_init(&call);
    lua_pushcfunction(L, record_thread);
    call.function_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_newtable(L); /* stands for the HostCallback object */
    gpurun_host_call_expect(L, &call, -1, 1);
    CHECK(gpurun_host_calls_pending() == 1);
    CHECK(call.anchor_ref != LUA_NOREF);
    struct driver_thread one = {&call, 0};
    pthread_t thread;
    pthread_create(&thread, NULL, driver, &one);
    pthread_join(thread, NULL);
    CHECK(returned[0]); /* without waiting for the main thread */
    lua_getglobal(L, "runs");
    CHECK(lua_tointeger(L, -1) == 0); /* not run yet */
    lua_pop(L, 1);
    CHECK(service_until(L, 1) == 1);
    lua_getglobal(L, "on_main");
    CHECK(lua_toboolean(L, -1));
    lua_pop(L, 1);
    CHECK(call.calls == 1 && call.pending == 0 && gpurun_host_calls_pending() == 0);
    CHECK(call.anchor_ref == LUA_NOREF);

    /* Several driver threads at once, the same call: each runs once. */
    gpurun_host_call_expect(L, &call, -1, 4);
    struct driver_thread many[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        many[i].call = &call;
        many[i].index = 1 + i;
        pthread_create(&threads[i], NULL, driver, &many[i]);
    }
    CHECK(service_until(L, 4) == 4);
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    lua_getglobal(L, "runs");
    CHECK(lua_tointeger(L, -1) == 5);
    lua_pop(L, 1);
    CHECK(call.calls == 5 && gpurun_host_calls_pending() == 0);

    /* An error: the driver's thread goes on, the servicing call gets it. */
    struct gpurun_host_call failing;
    gpurun_host_call_init(&failing);
    luaL_loadstring(L, "error('boom', 0)");
    failing.function_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    gpurun_host_call_expect(L, &failing, -1, 1);
    struct driver_thread bad = {&failing, 5};
    pthread_create(&thread, NULL, driver, &bad);
    while (!gpurun_host_calls_await(1000000)) {}
    int failed = 0, top = lua_gettop(L);
    CHECK(gpurun_host_calls_run(L, &failed) == 1);
    CHECK(failed == 1 && lua_gettop(L) == top + 1);
    CHECK(strcmp(lua_tostring(L, -1), "boom") == 0);
    lua_pop(L, 1);
    pthread_join(thread, NULL);
    CHECK(returned[5]);
    CHECK(failing.pending == 0 && gpurun_host_calls_pending() == 0);

    /* Inside a callback, GPU calls are refused. */
    CHECK(!gpurun_in_host_call());

    /* Shutting down drops a queued call without running Lua. */
    gpurun_host_call_expect(L, &call, -1, 1);
    struct driver_thread late = {&call, 6};
    pthread_create(&thread, NULL, driver, &late);
    pthread_join(thread, NULL);
    CHECK(returned[6]);
    CHECK(gpurun_host_calls_await(1000000));
    gpurun_host_calls_shut_down();
    CHECK(!gpurun_host_calls_await(1000));
    CHECK(call.calls == 5);
    CHECK(gpurun_host_calls_pending() == 0);
    /* After the shutdown a reached call returns at once. */
    struct driver_thread after = {&call, 7};
    pthread_create(&thread, NULL, driver, &after);
    pthread_join(thread, NULL);
    CHECK(returned[7]);

    lua_pop(L, 1);
    lua_close(L);
    printf("host_calls_test: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
