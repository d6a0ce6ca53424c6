/* The `gpurun` module opener: registers every type from one list, lowest
 * layer first, as Lua's linit.c opens its libraries, then the parts of the
 * module written in Lua (lua/gpurun/builtin/, loaded by module/lua_parts.c).
 * Nothing else lives here. */
#include "runtime/runtime.h"

#include "types/allocation_handle.h"
#include "types/blas.h"
#include "types/fft_plan.h"
#include "types/buffer/buffer.h"
#include "types/buffer/pinned_buffer.h"
#include "types/compare.h"
#include "types/condition.h"
#include "types/csr_matrix.h"
#include "types/device.h"
#include "types/dist.h"
#include "types/dtypes.h"
#include "types/event.h"
#include "types/graph.h"
#include "types/graph_builder.h"
#include "types/graph_facts.h"
#include "types/graph_nodes.h"
#include "types/graph_profile.h"
#include "types/ipc.h"
#include "types/host_callback.h"
#include "types/kernel.h"
#include "types/launch.h"
#include "types/launch_config.h"
#include "types/launch_plan.h"
#include "types/linker.h"
#include "types/memory_pool.h"
#include "types/nvml.h"
#include "types/object_code.h"
#include "types/program.h"
#include "types/generator.h"
#include "types/scalar.h"
#include "types/stream.h"
#include "types/struct.h"
#include "types/struct_layout.h"
#include "types/system.h"
#include "types/sm_resource.h"
#include "types/context.h"
#include "types/checkpoint.h"
#include "types/tensor_map.h"
#include "module/entry.h"
#include "module/lua_parts.h"

int luaopen_gpurun(lua_State *L);

/* Each adds its type's metatable and its functions to the module table at
 * the top of the stack. A type may use the ones above it in this list (and
 * give them methods: GraphBuilder adds Stream:create_graph_builder), never
 * the ones below. */
static void (*const openers[])(lua_State *L) = {
    gpurun_open_system,        /* device_count, versions, mem_info, perf_counter */
    gpurun_open_dtypes,        /* dtypes */
    gpurun_open_event,         /* gpurun.Event */
    gpurun_open_stream,        /* gpurun.Stream, set_current_stream */
    gpurun_open_sm_resource,   /* gpurun.SMResource */
    gpurun_open_device,        /* gpurun.Device */
    gpurun_open_context,       /* gpurun.Context, Device:create_context */
    gpurun_open_allocation_handle, /* gpurun.IPCAllocationHandle */
    gpurun_open_memory_pool,   /* gpurun.MemoryPool, Device:memory_pool, graph memory */
    gpurun_open_memory_pool_ipc, /* MemoryPool{ ipc = true }, from_allocation_handle */
    gpurun_open_condition,     /* gpurun.Condition */
    gpurun_open_graph_builder, /* gpurun.GraphBuilder, Stream:create_graph_builder, join */
    gpurun_open_graph_conditionals, /* GraphBuilder:if_then, if_else, switch, while_loop */
    gpurun_open_pinned,        /* gpurun.PinnedBuffer, pinned */
    gpurun_open_buffer,        /* gpurun.Buffer, empty, zeros, full, array, from_bytes */
    gpurun_open_rng,           /* gpurun.Generator, default_rng */
    gpurun_open_compare,       /* compare, allclose */
    gpurun_open_scalar,        /* gpurun.Scalar, u64, f32, ... */
    gpurun_open_struct,        /* gpurun.Struct */
    gpurun_open_struct_layout, /* gpurun.StructLayout, struct */
    gpurun_open_launch_config, /* gpurun.LaunchConfig */
    gpurun_open_kernel,        /* gpurun.Kernel */
    gpurun_open_object_code,   /* gpurun.ObjectCode */
    gpurun_open_program,       /* gpurun.Program, cache_info */
    gpurun_open_linker,        /* gpurun.Linker */
    gpurun_open_tensor_map,    /* gpurun.TensorMap, Buffer:as_tensor_map, check_tensor_map */
    gpurun_open_launch,        /* launch, Kernel:check_argument */
    gpurun_open_launch_plan,   /* gpurun.LaunchPlan, Kernel:bind */
    gpurun_open_blas,          /* the C side of matmul, axpy, dot, nrm2, scal */
    gpurun_open_csr_matrix,    /* gpurun.CsrMatrix, the C side of csr, spmv, spmm */
    gpurun_open_fft_plan,      /* the C side of gpurun.fft */
    gpurun_open_host_callback, /* gpurun.HostCallback */
    gpurun_open_graph,         /* gpurun.Graph */
    gpurun_open_graph_update,  /* the C side of Graph:update */
    gpurun_open_graph_complete, /* GraphBuilder:complete */
    gpurun_open_graph_embed,   /* GraphBuilder:embed */
    gpurun_open_graph_nodes,   /* Graph:nodes, set_args, set_arg, set_config, set_enabled */
    gpurun_open_graph_profile, /* the C side of Graph:profile */
    gpurun_open_graph_facts,   /* the C side of Graph:check and GraphBuilder:check */
    gpurun_open_dist,          /* the C side of require("gpurun.dist") */
    gpurun_open_nvml,          /* the C side of gpurun.system */
    gpurun_open_checkpoint,    /* checkpoint.lock, checkpoint, restore, unlock, state */
    gpurun_open_ipc,           /* the C side of gpurun.ipc */
};

/* The parts of the module written in Lua (lua/gpurun/builtin/), opened in
 * this order by module/lua_parts.c. */
static const char *const lua_parts[] = {
    "program_options", /* gpurun.ProgramOptions */
    "linker_options",  /* gpurun.LinkerOptions */
    "graph_dot",       /* Graph:to_dot */
    "graph_profile",   /* Graph:profile */
    "loops",           /* GraphBuilder:while_loop, if_then, if_else from expressions */
    "graph_update",    /* Graph:update */
    "graph_check",     /* Graph:check, GraphBuilder:check and complete, Kernel:set_access */
    "npy_files",       /* gpurun.load, Buffer:save */
    "pipeline",        /* gpurun.pipeline */
    "guard",           /* gpurun.guard */
    "library_functions", /* gpurun.elementwise, reduction, sum..., sort, matmul, csr... */
    "fft",             /* gpurun.fft, gpurun.FftPlan */
    "random",          /* gpurun.device_rng, gpurun.DeviceGenerator */
    "system",          /* gpurun.system (NVML) */
    "ipc",             /* gpurun.ipc.send, receive */
};

int luaopen_gpurun(lua_State *L)
{
    /* The version check and the one-state guard, before the runtime's state
     * object, so that the guard's __gc runs after the runtime's. */
    gpurun_module_prologue(L);
    gpurun_open_runtime(L);
    lua_newtable(L);
    int module = lua_gettop(L);
    for (size_t i = 0; i < sizeof openers / sizeof openers[0]; i++)
        openers[i](L);
    /* The Lua parts may require gpurun's Lua library, which requires gpurun:
     * they find this table, not a second opening. */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushvalue(L, module);
    lua_setfield(L, -2, "gpurun");
    lua_pop(L, 1);
    for (size_t i = 0; i < sizeof lua_parts / sizeof lua_parts[0]; i++)
        gpurun_open_lua_part(L, module, lua_parts[i]);
    return 1;
}
