/* gpurun.checkpoint: the driver's process checkpoint (cuCheckpointProcess*)
 * for this process. Between lock and unlock the driver holds every other
 * CUDA call of the process; a finalizer making one would wait forever, so
 * the Lua collector is stopped from a lock to its unlock, and a script that
 * ends locked is unlocked before the other finalizers run. */
#include "types/checkpoint.h"

#include <string.h>
#include <unistd.h>

/* The table's name, for gpurun_set_type_functions: "gpurun.checkpoint.lock". */
static const struct gpurun_tag checkpoint_tag = {"gpurun.checkpoint"};

/* Whether lock stopped the collector (it was running), for unlock to restart. */
static int collector_stopped;

/* Between a lock and its unlock: the registry holds an object whose
 * finalizer restores and unlocks the process, so that a script ending
 * while locked (an error, say) exits instead of waiting forever in the
 * other finalizers' CUDA calls. Made at the lock, after every other object
 * whose finalizer calls CUDA, it is finalized first. */
#define LOCK_KEY "gpurun.checkpoint_lock"
static int process_locked;

static int release_at_exit(lua_State *L)
{
    (void)L;
    if (!process_locked || cuda.cuCheckpointProcessGetState == NULL)
        return 0;
    process_locked = 0;
    int pid = (int)getpid();
    CUprocessState state = CU_PROCESS_STATE_RUNNING;
    if (CUDA_CALL(cuCheckpointProcessGetState, pid, &state) != CUDA_SUCCESS)
        return 0;
    if (state == CU_PROCESS_STATE_CHECKPOINTED) {
        CUcheckpointRestoreArgs restore;
        memset(&restore, 0, sizeof restore);
        if (CUDA_CALL(cuCheckpointProcessRestore, pid, &restore) != CUDA_SUCCESS)
            return 0;
        state = CU_PROCESS_STATE_LOCKED;
    }
    if (state == CU_PROCESS_STATE_LOCKED) {
        CUcheckpointUnlockArgs unlock;
        memset(&unlock, 0, sizeof unlock);
        (void)CUDA_CALL(cuCheckpointProcessUnlock, pid, &unlock);
    }
    return 0;
}

static void hold_release(lua_State *L)
{
    process_locked = 1;
    lua_newuserdatauv(L, 0, 0);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, release_at_exit);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, LOCK_KEY);
}

static void drop_release(lua_State *L)
{
    process_locked = 0;
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, LOCK_KEY);
}

static const char *const lock_options[] = {"timeout_ms", NULL};

static void require_checkpoints(lua_State *L)
{
    GPURUN_REQUIRE_ENTRY(L, "process checkpoints", cuCheckpointProcessLock, 12080);
    GPURUN_REQUIRE_ENTRY(L, "process checkpoints", cuCheckpointProcessCheckpoint, 12080);
    GPURUN_REQUIRE_ENTRY(L, "process checkpoints", cuCheckpointProcessRestore, 12080);
    GPURUN_REQUIRE_ENTRY(L, "process checkpoints", cuCheckpointProcessUnlock, 12080);
    GPURUN_REQUIRE_ENTRY(L, "process checkpoints", cuCheckpointProcessGetState, 12080);
    GPURUN_REQUIRE_ENTRY(L, "process checkpoints", cuCheckpointProcessGetRestoreThreadId, 12080);
}

/* lock([{ timeout_ms = N }]): no timeout (0) unless given. */
static int checkpoint_lock(lua_State *L)
{
    gpurun_check_options(L, 1, lock_options);
    lua_Integer timeout = gpurun_opt_integer_field(L, 1, "timeout_ms", 0,
                                                   "a whole number of milliseconds");
    if (timeout < 0 || timeout > 0xffffffffLL)
        return gpurun_arg_error(L, 1, "option 'timeout_ms' must be 0 (no timeout) to 4294967295, got %I",
                                (LUAI_UACINT)timeout);
    require_checkpoints(L);
    if (gpurun_capture_in_progress())
        return gpurun_error(L, "checkpoint.lock: a graph capture is in progress; end it first");
    CUcheckpointLockArgs args;
    memset(&args, 0, sizeof args);
    args.timeoutMs = (unsigned int)timeout;
    int pid = (int)getpid();
    /* Made before the lock: allocating then could run finalizers. A second
     * lock is the driver's to refuse, and the first one's stays. */
    int first = !process_locked;
    if (first)
        hold_release(L);
    if (CUDA_CALL(cuCheckpointProcessLock, pid, &args) != CUDA_SUCCESS) {
        if (first)
            drop_release(L);
        return gpurun_cuda_error(L, "locking process %d for a checkpoint", pid);
    }
    if (!collector_stopped && lua_gc(L, LUA_GCISRUNNING)) {
        lua_gc(L, LUA_GCSTOP);
        collector_stopped = 1;
    }
    return 0;
}

static int checkpoint_checkpoint(lua_State *L)
{
    require_checkpoints(L);
    CUcheckpointCheckpointArgs args;
    memset(&args, 0, sizeof args);
    int pid = (int)getpid();
    if (CUDA_CALL(cuCheckpointProcessCheckpoint, pid, &args) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "checkpointing process %d", pid);
    return 0;
}

static int checkpoint_restore(lua_State *L)
{
    require_checkpoints(L);
    CUcheckpointRestoreArgs args;
    memset(&args, 0, sizeof args);
    int pid = (int)getpid();
    if (CUDA_CALL(cuCheckpointProcessRestore, pid, &args) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "restoring process %d from its checkpoint", pid);
    return 0;
}

static int checkpoint_unlock(lua_State *L)
{
    require_checkpoints(L);
    CUcheckpointUnlockArgs args;
    memset(&args, 0, sizeof args);
    int pid = (int)getpid();
    if (CUDA_CALL(cuCheckpointProcessUnlock, pid, &args) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "unlocking process %d after a checkpoint", pid);
    drop_release(L);
    if (collector_stopped) {
        collector_stopped = 0;
        lua_gc(L, LUA_GCRESTART);
    }
    return 0;
}

/* state() -> "running" | "locked" | "checkpointed" | "failed" */
static int checkpoint_state(lua_State *L)
{
    require_checkpoints(L);
    CUprocessState state = CU_PROCESS_STATE_RUNNING;
    int pid = (int)getpid();
    if (CUDA_CALL(cuCheckpointProcessGetState, pid, &state) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "reading the checkpoint state of process %d", pid);
    switch (state) {
    case CU_PROCESS_STATE_RUNNING: lua_pushliteral(L, "running"); break;
    case CU_PROCESS_STATE_LOCKED: lua_pushliteral(L, "locked"); break;
    case CU_PROCESS_STATE_CHECKPOINTED: lua_pushliteral(L, "checkpointed"); break;
    case CU_PROCESS_STATE_FAILED: lua_pushliteral(L, "failed"); break;
    default: lua_pushfstring(L, "unknown (%d)", (int)state); break;
    }
    return 1;
}

/* restore_thread_id() -> the id of the driver's thread that restores. */
static int checkpoint_restore_thread_id(lua_State *L)
{
    require_checkpoints(L);
    int tid = 0;
    int pid = (int)getpid();
    if (CUDA_CALL(cuCheckpointProcessGetRestoreThreadId, pid, &tid) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "reading the restore thread of process %d", pid);
    lua_pushinteger(L, tid);
    return 1;
}

static const luaL_Reg checkpoint_functions[] = {
    {"lock", checkpoint_lock},
    {"checkpoint", checkpoint_checkpoint},
    {"restore", checkpoint_restore},
    {"unlock", checkpoint_unlock},
    {"state", checkpoint_state},
    {"restore_thread_id", checkpoint_restore_thread_id},
    {NULL, NULL}
};

void gpurun_open_checkpoint(lua_State *L)
{
    gpurun_set_type_functions(L, &checkpoint_tag, checkpoint_functions);
}
