-- Everything the `gpurun` module offers a script: its functions, and each
-- type's methods, with what kind of value every argument is. The bad-input
-- suite checks that it has rows for every entry here and that this catalog
-- names everything the module and its metatables really hold, so a new
-- function or method fails the suite until it is described and covered. The
-- fuzzer (tools/fuzz.lua) draws its calls and their likely arguments from it.
local catalog = {}

-- The types a script can hold, by the name after "gpurun." in their
-- metatable's name.
catalog.types = {
  "Device", "Stream", "Event", "ProgramOptions", "Program", "ObjectCode", "Kernel",
  "LaunchPlan", "LaunchConfig", "Scalar", "Buffer", "Generator", "DeviceGenerator", "FftPlan", "GraphBuilder", "Graph",
  "Condition", "PinnedBuffer", "HostCallback", "MemoryPool", "LinkerOptions", "Linker",
  "StructLayout", "Struct",
  "TensorMap", "SMResource", "Context", "IPCAllocationHandle", "CsrMatrix",
}

-- Metatables gpurun registers for itself that no script ever holds.
catalog.internal_types = {
  CompileOutput = "NVRTC's output during a compile, freed by the collector",
  LinkOutput = "nvJitLink's output during a link, freed by the collector",
  Communicator = "the world's NCCL communicator (gpurun.dist), kept by graphs that captured its collectives",
  BlasHandle = "a stream's cuBLAS handle and workspace, kept by graphs that captured its calls",
  SparseHandles = "the devices' cuSPARSE handles, destroyed when the Lua state closes",
  FftPlanCore = "a cuFFT plan and its work area, held by a gpurun.FftPlan and by graphs that captured it",
  GraphProfileTwin = "Graph:profile's instrumented copy of a graph and its events, closed before it returns",
}

-- Types that need a current device to make one (the others can be made on
-- any machine).
catalog.device_types = {
  Device = true, Stream = true, Event = true, Kernel = true, LaunchPlan = true,
  Buffer = true, GraphBuilder = true, Graph = true, Condition = true, PinnedBuffer = true,
  MemoryPool = true, TensorMap = true, SMResource = true, Context = true, DeviceGenerator = true,
  CsrMatrix = true,
  FftPlan = true,
}

-- Argument kinds (the fuzzer draws a plausible value for each, or anything):
--   count      element count           dtype      dtype name
--   element    a value to store        integer    any integer
--   number     any number              string     any string
--   seed       generator seed          attribute  CU_DEVICE_ATTRIBUTE_* value
--   index      1-based element index   tolerance  rtol / atol
--   sequence   a table of elements     source     CUDA C++ source text
--   code_type  "c++"                   target_name "ptx" / "cubin"
--   options    ProgramOptions or table options_table  ProgramOptions{...} input
--   compile_args  compile()'s table    config_table   LaunchConfig{...} input
--   kernel_name   a kernel's name      cuda_call  a driver call's name
--   cuda_result   a CUresult number
--   event_options  gpurun.Event{...} input   stream_options  create_stream{...} input
--   occupancy_options  kernel:occupancy{...} / max_potential_block_size{...} input
--   first, range_count  an element range (1-based first element, count)
--   bytes      a string of raw elements
--   copy_source  what Buffer:copy_from takes (table, string, Buffer, PinnedBuffer, file)
--   copy_destination  what Buffer:copy_to takes (Buffer, PinnedBuffer, file)
--   host_source  a table or a string (PinnedBuffer:copy_from)
--   path       a file path             shape      a sequence of dimensions
--   and the types: device, stream, event, buffer, config, kernel, launch_target
--   (Stream or GraphBuilder), buffer_or_table, buffer_or_number,
--   kernel_arg (what a launch passes: Buffer, scalar, Struct, number, boolean),
--   builder, condition, event_or_builder (GraphBuilder:wait),
--   event_or_stream (Stream:wait), node_index (a Graph's node), boolean,
--   output_path (a file gpurun writes), dot_flags (debug_dot_print's options), dot_options (to_dot's), profile_options (Graph:profile's),
--   check_options (Graph:check's and GraphBuilder:check's { raise = }), access_modes
--   (Kernel:set_access's { [position] = "r" | "w" | "rw" }),
--   condition_default (the fuzzer keeps it 0: a while loop whose body never
--   clears its condition replays forever), if_condition (a Condition or an
--   expression over the buffer x), loop_condition (the same, but never an
--   expression that can be true: the body changes nothing),
--   condition_buffers ({ x = Buffer }, or a while loop's options),
--   loop_options (while_loop's { cancellable = }), host_function (HostCallback's
--   function), pipeline_options (gpurun.pipeline's table), pool (a MemoryPool),
--   placement (a constructor's { pool =, stream = }), managed_options
--   (gpurun.managed's { attach = }), pinned_options (gpurun.pinned's
--   { mapped = }), location ("host", a Device or an ordinal: where managed
--   pages go), advice (Buffer:advise's name), pool_options
--   (gpurun.MemoryPool{...} input), complete_options (GraphBuilder:complete's),
--   build_options (GraphBuilder:begin_building's { mode = } or the mode's
--   name), graph_or_builder (what GraphBuilder:embed copies),
--   tensor_map_options (Buffer:as_tensor_map's), tensor_map (a TensorMap).
--   For green contexts: split_options (SMResource:split's { count =, groups = }),
--   context_options (Device:create_context's { resources = { SMResource, ... } }).
--   For reductions and scans: params_text (a parameter list), c_expression
--   (a map, post-map or reduce expression), reduce_op (a named operation or
--   an expression of a and b), identity, reduction_options (gpurun.reduction's),
--   reduce_options (the prebuilt reductions'), scan_op, scan_options,
--   predicate (select's). sort_options (gpurun.sort's { values =, descending =,
--   out =, values_out =, segments = }), search_options (lower_bound's and
--   upper_bound's { out = }). kernel_options (gpurun.elementwise's). For
--   elementwise pipelines: stage_list (their stages,
--   reading params_text's names), stage_names (their outputs),
--   pipeline_kernel_options (gpurun.elementwise_pipeline's options).
--   For structs: struct_fields (gpurun.struct's field list), struct_options
--   (its { align = }), struct_values (a value's { name = number, ... }),
--   struct_field_name (a field's name, or anything).
--   For cuBLAS: matrix_options (gpurun.matrix's { ld =, batch =, stride = }),
--   matrix_view (a 2-D view, a list of them, or anything), matmul_options
--   (gpurun.matmul's table, its epilogue from matmul_epilogue: cuBLASLt's
--   names and others, its bias a buffer), blas_alpha (a number or a 1-element buffer),
--   blas_options (axpy's and scal's { stream = }), blas_result_options
--   (dot's and nrm2's { out =, stream = }).
--   For cuSPARSE: csr_matrix (a CsrMatrix, or anything), sparse_options
--   (spmv's and spmm's { alpha =, beta =, transpose =, stream = }).
--   For device_rng: buffer_or_count (a fill's buffer, or an element count),
--   rng_options (a fill's and get_state's { stream = }), rng_state
--   (set_state's { seed =, offset =, stream = }).
-- reduces = the call generates and compiles a kernel for its arguments'
-- dtypes (NVRTC's time, once per dtype: the fuzzer's draws stay few).
-- writes = the argument position of a path the call writes (the fuzzer
-- points it at a scratch file).
-- A trailing "..." entry means any number of the kind before it.
--
-- Module functions. never_raises: takes no arguments and answers on any
-- machine (extra arguments are ignored, as Lua's own functions do).
-- allocates = the argument position of an element count that sizes an
-- allocation (the fuzzer caps it); host_memory: the allocation is pinned
-- host memory (the fuzzer's absurd sizes are then past any address space).
catalog.functions = {
  perf_counter = { args = {}, never_raises = true },
  device_count = { args = {}, never_raises = true },
  driver_error = { args = {}, never_raises = true },
  nvrtc_version = { args = {}, never_raises = true },
  cache_info = { args = {}, never_raises = true },
  clear_cache_counters = { args = {}, never_raises = true },
  current_stream = { args = {}, never_raises = true },
  driver_version = { args = {}, needs = "driver" },
  mem_info = { args = {}, needs = "device" },
  format_cuda_error = { args = { "cuda_call", "cuda_result" } },
  set_current_stream = { args = { "stream" } },
  Device = { args = { "integer" }, needs = "driver" },
  ProgramOptions = { args = { "options_table" } },
  Program = { args = { "source", "code_type", "options" } },
  LinkerOptions = { args = { "linker_options_table" } },
  Linker = { args = { "object_code", "object_code", "linker_options" } },
  LaunchConfig = { args = { "config_table" } },
  launch = { args = { "launch_target", "config", "kernel", "kernel_arg", "..." }, launches = true },
  i32 = { args = { "integer" } },
  u32 = { args = { "integer" } },
  i64 = { args = { "integer" } },
  u64 = { args = { "integer" } },
  f32 = { args = { "number" } },
  f64 = { args = { "number" } },
  f16 = { args = { "number" } },
  bf16 = { args = { "number" } },
  i8 = { args = { "integer" } },
  u8 = { args = { "integer" } },
  i16 = { args = { "integer" } },
  u16 = { args = { "integer" } },
  empty = { args = { "count", "dtype", "placement" }, needs = "device", allocates = 1 },
  zeros = { args = { "count", "dtype", "placement" }, needs = "device", allocates = 1 },
  full = { args = { "count", "element", "dtype", "placement" }, needs = "device", allocates = 1 },
  array = { args = { "sequence", "dtype", "placement" }, needs = "device" },
  MemoryPool = { args = { "pool_options" }, needs = "device" },
  IPCAllocationHandle = { args = { "file_descriptor", "ipc_descriptor" } },
  compare = { args = { "buffer", "buffer_or_number", "tolerance", "tolerance" }, needs = "device" },
  allclose = { args = { "buffer", "buffer_or_number", "tolerance", "tolerance" }, needs = "device" },
  default_rng = { args = { "seed" } },
  device_rng = { args = { "seed" }, needs = "device" },
  elementwise = { args = { "params_text", "params_text", "c_expression", "kernel_name", "kernel_options" } },
  elementwise_pipeline = { args = { "params_text", "stage_list", "stage_names", "kernel_name",
                                    "pipeline_kernel_options" } },
  reduction = { args = { "params_text", "params_text", "c_expression", "reduce_op", "c_expression",
                         "identity", "kernel_name", "reduction_options" } },
  sum = { args = { "launch_target", "buffer", "buffer", "reduce_options" }, reduces = true },
  prod = { args = { "launch_target", "buffer", "buffer", "reduce_options" }, reduces = true },
  min = { args = { "launch_target", "buffer", "buffer", "reduce_options" }, reduces = true },
  max = { args = { "launch_target", "buffer", "buffer", "reduce_options" }, reduces = true },
  argmin = { args = { "launch_target", "buffer", "buffer", "reduce_options" }, reduces = true },
  argmax = { args = { "launch_target", "buffer", "buffer", "reduce_options" }, reduces = true },
  any = { args = { "launch_target", "buffer", "buffer", "reduce_options" }, reduces = true },
  all = { args = { "launch_target", "buffer", "buffer", "reduce_options" }, reduces = true },
  mean = { args = { "launch_target", "buffer", "buffer", "reduce_options" }, reduces = true },
  norm = { args = { "launch_target", "buffer", "buffer", "reduce_options" }, reduces = true },
  max_abs_diff = { args = { "launch_target", "buffer", "buffer_or_number", "buffer", "reduce_options" },
                   reduces = true },
  inclusive_scan = { args = { "launch_target", "buffer", "buffer", "scan_op", "scan_options" }, reduces = true },
  exclusive_scan = { args = { "launch_target", "buffer", "buffer", "scan_op", "scan_options" }, reduces = true },
  select = { args = { "launch_target", "buffer", "predicate", "buffer", "buffer", "scan_options" },
             reduces = true },
  sort = { args = { "launch_target", "buffer", "sort_options" }, reduces = true },
  lower_bound = { args = { "launch_target", "buffer", "buffer", "search_options" }, reduces = true },
  upper_bound = { args = { "launch_target", "buffer", "buffer", "search_options" }, reduces = true },
  join = { args = { "builder", "builder", "builder", "..." } },
  Event = { args = { "event_options" }, needs = "device" },
  from_bytes = { args = { "bytes", "dtype" }, needs = "device" },
  pinned = { args = { "count", "dtype", "pinned_options" }, needs = "device", allocates = 1,
             host_memory = true },
  managed = { args = { "count", "dtype", "managed_options" }, needs = "device", allocates = 1 },
  load = { args = { "path" } },
  HostCallback = { args = { "host_function" } },
  pipeline = { args = { "pipeline_options" } },
  guard = { args = { "any" } },
  struct = { args = { "struct_fields", "struct_options" } },
  check_tensor_map = { args = { "tensor_map_options", "dtype", "count", "integer" } },
  matrix = { args = { "buffer", "integer", "integer", "matrix_options" } },
  matmul = { args = { "matrix_view", "matrix_view", "matmul_options" } },
  axpy = { args = { "blas_alpha", "buffer", "buffer", "blas_options" } },
  scal = { args = { "blas_alpha", "buffer", "blas_options" } },
  dot = { args = { "buffer", "buffer", "blas_result_options" } },
  nrm2 = { args = { "buffer", "blas_result_options" } },
  csr = { args = { "buffer", "buffer", "buffer", "integer", "integer" } },
  spmv = { args = { "csr_matrix", "buffer", "buffer", "sparse_options" } },
  spmm = { args = { "csr_matrix", "matrix_view", "matrix_view", "sparse_options" } },
}

-- Functions a type's table holds (gpurun.ObjectCode.from_cubin, cuda.core's
-- constructors other than the type itself), by type, as the module
-- functions above are described. Their labels are "gpurun.ObjectCode.from_cubin".
--   object_code an ObjectCode          link_target "cubin" / "ptx"
--   linker_options  LinkerOptions or table   linker_options_table  LinkerOptions{...} input
--   code_input  what the from_<type> functions take: a string of code or
--               { path = "file" }      code_options  their { name =, symbol_mapping = }
catalog.type_functions = {
  ObjectCode = {
    from_cubin = { args = { "code_input", "code_options" } },
    from_ptx = { args = { "code_input", "code_options" } },
    from_ltoir = { args = { "code_input", "code_options" } },
    from_fatbin = { args = { "code_input", "code_options" } },
    from_object = { args = { "code_input", "code_options" } },
    from_library = { args = { "code_input", "code_options" } },
  },
  -- Sharing between processes: ipc_descriptor (a descriptor string, a
  -- damaged one, or anything), allocation_handle (an IPCAllocationHandle),
  -- socket_path (a Unix socket's path), ipc_values (send's sequence),
  -- ipc_options (send's and receive's { timeout =, import =, max_bytes = };
  -- the fuzzer keeps timeouts short). ipc: it waits on a socket, with its
  -- options at that position (the fuzzer's guard shortens the wait).
  MemoryPool = {
    from_allocation_handle = { args = { "allocation_handle", "ipc_descriptor" }, needs = "driver" },
  },
  Buffer = {
    from_ipc = { args = { "ipc_descriptor", "pool" }, needs = "driver" },
  },
  Event = {
    from_ipc = { args = { "ipc_descriptor" }, needs = "driver" },
  },
  ipc = {
    send = { args = { "socket_path", "ipc_values", "ipc_options" }, ipc = 3 },
    receive = { args = { "socket_path", "ipc_options" }, ipc = 2 },
  },
  -- gpurun.fft (cuFFT): fft_shape (a size or a sequence of them),
  -- fft_plan_options (plan's { kind =, dtype =, batch =, stream = }),
  -- fft_call_options (the one-call functions' { n =, stream = }).
  fft = {
    plan = { args = { "fft_shape", "fft_plan_options" }, needs = "device" },
    fft = { args = { "buffer", "fft_call_options" }, allocates = 1 },
    ifft = { args = { "buffer", "fft_call_options" }, allocates = 1 },
    rfft = { args = { "buffer", "fft_call_options" }, allocates = 1 },
    irfft = { args = { "buffer", "fft_call_options" }, allocates = 2 },
    clear_cache = { args = {}, never_raises = true },
  },
  -- gpurun.checkpoint: this process's checkpoint (checkpoint_lock_options:
  -- lock's { timeout_ms = }).
  checkpoint = {
    lock = { args = { "checkpoint_lock_options" }, needs = "driver", checkpoint = true },
    checkpoint = { args = {}, needs = "driver", checkpoint = true },
    restore = { args = {}, needs = "driver", checkpoint = true },
    unlock = { args = {}, needs = "driver", checkpoint = true },
    state = { args = {}, needs = "driver" },
    restore_thread_id = { args = {}, needs = "driver" },
  },
}

-- Methods, by type; self comes first and is not listed.
catalog.methods = {
  Device = {
    set_current = { args = {} },
    sync = { args = {} },
    create_stream = { args = { "stream_options" } },
    get_attribute = { args = { "attribute" } },
    can_access_peer = { args = { "device" } },
    enable_peer_access = { args = { "device" } },
    memory_pool = { args = {} },
    graph_memory = { args = {} },
    trim_graph_memory = { args = {} },
    reset_graph_memory_peaks = { args = {} },
    create_context = { args = { "context_options" } },
    close = { args = {} },
  },
  Stream = {
    sync = { args = {} },
    query = { args = {} },
    record = { args = { "event" } },
    wait = { args = { "event_or_stream" } },
    create_graph_builder = { args = {} },
    close = { args = {} },
  },
  Event = {
    sync = { args = {} },
    query = { args = {} },
    elapsed_ms = { args = { "event" } },
    ipc_descriptor = { args = {} },
    close = { args = {} },
  },
  ProgramOptions = {
    as_list = { args = {} },
    close = { args = {} },
  },
  Program = {
    compile = { args = { "target_name", "compile_args" }, compiles = true },
    close = { args = {} },
  },
  ObjectCode = {
    get_kernel = { args = { "kernel_name" } },
    save = { args = { "output_path" }, writes = 1 },
    close = { args = {} },
  },
  LinkerOptions = {
    as_list = { args = {} },
    close = { args = {} },
  },
  Linker = {
    link = { args = { "link_target" }, compiles = true },
    get_info_log = { args = {} },
    get_error_log = { args = {} },
    close = { args = {} },
  },
  Kernel = {
    params = { args = {} },
    bind = { args = { "config", "kernel_arg", "..." }, launches = true },
    check_argument = { args = { "index", "kernel_arg" } },
    set_access = { args = { "access_modes" } },
    access = { args = {} },
    set_max_dynamic_shared_size_bytes = { args = { "integer" } },
    occupancy = { args = { "occupancy_options" } },
    max_potential_block_size = { args = { "occupancy_options" } },
    close = { args = {} },
  },
  LaunchPlan = {
    launch = { args = { "launch_target" } },
    close = { args = {} },
  },
  LaunchConfig = {},
  Scalar = {},
  Buffer = {
    ipc_descriptor = { args = {} },
    fill = { args = { "element", "first", "range_count", "stream" } },
    copy_from = { args = { "copy_source", "first", "range_count", "stream" } },
    copy_to = { args = { "copy_destination", "first", "range_count", "stream" } },
    to_table = { args = { "first", "range_count", "stream" } },
    to_bytes = { args = { "first", "range_count", "stream" } },
    view = { args = { "first", "range_count" } },
    as_tensor_map = { args = { "tensor_map_options" } },
    save = { args = { "path", "shape" }, writes = 1 },
    get = { args = { "index", "stream" } },
    set = { args = { "index", "element", "stream" } },
    prefetch = { args = { "location", "stream" } },
    advise = { args = { "advice", "location" } },
    close = { args = { "launch_target" } },
  },
  PinnedBuffer = {
    get = { args = { "index" } },
    set = { args = { "index", "element" } },
    fill = { args = { "element", "first", "range_count" } },
    to_table = { args = { "first", "range_count" } },
    to_bytes = { args = { "first", "range_count" } },
    copy_from = { args = { "host_source", "first", "range_count" } },
    close = { args = {} },
  },
  Generator = {
    random = { args = { "count", "dtype", "placement" }, allocates = 1 },
    integers = { args = { "count", "integer", "integer", "dtype", "placement" }, allocates = 1 },
    random_table = { args = { "count", "dtype" }, host_table = 1 },
    close = { args = {} },
  },
  -- fft_execute_options: { direction =, stream = }.
  FftPlan = {
    execute = { args = { "buffer", "buffer", "fft_execute_options" } },
    close = { args = {} },
  },
  DeviceGenerator = {
    random = { args = { "buffer_or_count", "dtype", "rng_options" }, allocates = 1, reduces = true },
    uniform = { args = { "buffer_or_count", "number", "number", "dtype", "rng_options" }, allocates = 1,
                reduces = true },
    normal = { args = { "buffer_or_count", "number", "number", "dtype", "rng_options" }, allocates = 1,
               reduces = true },
    integers = { args = { "buffer_or_count", "integer", "integer", "dtype", "rng_options" }, allocates = 1,
                 reduces = true },
    set_state = { args = { "rng_state" } },
    get_state = { args = { "rng_options" } },
    close = { args = {} },
  },
  GraphBuilder = {
    begin_building = { args = { "build_options" } },
    end_building = { args = {} },
    complete = { args = { "complete_options" } },
    check = { args = { "check_options" } },
    split = { args = { "integer" }, forks = 1 },
    record = { args = { "event" } },
    wait = { args = { "event_or_builder" } },
    create_condition = { args = { "condition_default" }, condition_default = 1 },
    create_conditional_handle = { args = { "condition_default" }, condition_default = 1 },
    if_then = { args = { "if_condition", "condition_buffers" } },
    if_cond = { args = { "if_condition", "condition_buffers" } },
    if_else = { args = { "if_condition", "condition_buffers" } },
    switch = { args = { "condition", "integer" } },
    while_loop = { args = { "loop_condition", "condition_buffers", "loop_options" } },
    debug_dot_print = { args = { "output_path", "dot_flags" }, writes = 1 },
    embed = { args = { "graph_or_builder" } },
    close = { args = {} },
  },
  Graph = {
    launch = { args = { "stream" } },
    upload = { args = { "stream" } },
    update = { args = { "builder" } },
    cancel = { args = {} },
    nodes = { args = {} },
    set_args = { args = { "node_index", "kernel_arg", "..." }, launches = true },
    set_arg = { args = { "node_index", "integer", "kernel_arg" }, launches = true },
    set_config = { args = { "node_index", "config" } },
    set_enabled = { args = { "node_index", "boolean" } },
    to_dot = { args = { "dot_options" } },
    profile = { args = { "stream", "profile_options" }, runs = true },
    check = { args = { "check_options" } },
    close = { args = {} },
  },
  Condition = {
    close = { args = {} },
  },
  HostCallback = {
    launch = { args = { "launch_target" } },
    close = { args = {} },
  },
  MemoryPool = {
    trim = { args = { "integer" } },
    reset_peaks = { args = {} },
    get_allocation_handle = { args = {} },
    set_access = { args = { "device", "access_mode" } },
    get_access = { args = { "device" } },
    close = { args = {} },
  },
  IPCAllocationHandle = {
    close = { args = {} },
  },
  StructLayout = {
    new = { args = { "struct_values" } },
    offsetof = { args = { "struct_field_name" } },
  },
  Struct = {},
  TensorMap = {
    replace_address = { args = { "buffer" } },
    close = { args = {} },
  },
  SMResource = {
    split = { args = { "split_options" } },
    close = { args = {} },
  },
  Context = {
    create_stream = { args = { "stream_options" } },
    sync = { args = {} },
    close = { args = {} },
  },
  CsrMatrix = {
    close = { args = {} },
  },
}

-- Metamethods a script reaches through operators and indexing (the
-- fuzzer calls them directly; __gc is left out: calling it by hand is not
-- something a script does by accident).
catalog.metamethods = {
  Device = { "__index", "__tostring", "__close" },
  Stream = { "__index", "__tostring", "__close" },
  Event = { "__index", "__sub", "__tostring", "__close" },
  ProgramOptions = { "__index", "__newindex", "__tostring", "__close" },
  Program = { "__index", "__tostring", "__close" },
  ObjectCode = { "__index", "__tostring", "__close" },
  Kernel = { "__index", "__tostring", "__close" },
  LaunchPlan = { "__index", "__tostring", "__close" },
  LaunchConfig = { "__index", "__tostring" },
  Scalar = { "__index", "__tostring" },
  Buffer = { "__index", "__len", "__tostring", "__close" },
  Generator = { "__tostring", "__close" },
  DeviceGenerator = { "__tostring", "__close" },
  FftPlan = { "__index", "__tostring", "__close" },
  GraphBuilder = { "__index", "__tostring", "__close" },
  Graph = { "__index", "__tostring", "__close" },
  Condition = { "__index", "__tostring", "__close" },
  PinnedBuffer = { "__index", "__newindex", "__len", "__tostring", "__close" },
  HostCallback = { "__index", "__tostring", "__close" },
  MemoryPool = { "__index", "__tostring", "__close" },
  LinkerOptions = { "__index", "__newindex", "__tostring", "__close" },
  Linker = { "__tostring", "__close" },
  StructLayout = { "__index", "__call", "__tostring" },
  Struct = { "__index", "__newindex", "__tostring" },
  TensorMap = { "__tostring", "__close" },
  SMResource = { "__index", "__tostring", "__close" },
  Context = { "__index", "__tostring", "__close" },
  IPCAllocationHandle = { "__index", "__tostring", "__close" },
  CsrMatrix = { "__index", "__tostring", "__close" },
}

-- require("gpurun.dist"), after torch.distributed: its functions, with
-- what kind of value every argument is (the kinds above, and dist_options:
-- init's table, op: a reduction op name, rank: a root rank, collective_target:
-- nil, a Stream or a GraphBuilder). takes_nothing: no argument it could
-- refuse (dist_spec.lua covers them). The fuzzer leaves them alone: one
-- dist.init would start a world for the rest of its run.
catalog.dist = {
  init = { args = { "dist_options" } },
  launcher = { args = {}, takes_nothing = true },
  info = { args = {}, takes_nothing = true },
  is_initialized = { args = {}, takes_nothing = true },
  rank = { args = {}, takes_nothing = true },
  size = { args = {}, takes_nothing = true },
  local_rank = { args = {}, takes_nothing = true },
  barrier = { args = {}, takes_nothing = true },
  device = { args = {}, takes_nothing = true },
  nccl_version = { args = {}, takes_nothing = true },
  all_reduce = { args = { "buffer", "op", "collective_target" } },
  broadcast = { args = { "buffer", "rank", "collective_target" } },
  all_gather = { args = { "buffer", "buffer", "collective_target" } },
  reduce_scatter = { args = { "buffer", "buffer", "op", "collective_target" } },
}

-- gpurun.system, after cuda.core.system: its functions, with what kind of
-- value every argument is (the kinds above, and system_device: an NVML
-- device index or a report of system.Device, p2p_caps: "read", "write",
-- "nvlink", "atomics" or "pci"). takes_nothing: no argument it could
-- refuse (system_spec.lua covers what they answer). needs_nvml: it loads
-- NVML, which a machine without the driver lacks (the fuzzer sees the
-- one-line message there).
catalog.system = {
  nvml_error = { args = {}, takes_nothing = true },
  get_driver_version = { args = {}, takes_nothing = true, needs_nvml = true },
  get_driver_version_full = { args = {}, takes_nothing = true, needs_nvml = true },
  get_kernel_mode_driver_version = { args = {}, takes_nothing = true, needs_nvml = true },
  get_nvml_version = { args = {}, takes_nothing = true, needs_nvml = true },
  get_driver_branch = { args = {}, takes_nothing = true, needs_nvml = true },
  get_num_devices = { args = {}, takes_nothing = true, needs_nvml = true },
  devices = { args = {}, takes_nothing = true, needs_nvml = true },
  topology = { args = {}, takes_nothing = true, needs_nvml = true },
  get_process_name = { args = { "integer" }, needs_nvml = true },
  Device = { args = { "system_device" }, needs_nvml = true },
  get_topology_common_ancestor = { args = { "system_device", "system_device" }, needs_nvml = true },
  get_p2p_status = { args = { "system_device", "system_device", "p2p_caps" }, needs_nvml = true },
}

-- What gpurun.system really holds, compared with catalog.system: a list of
-- lines naming each difference.
function catalog.system_differences(system)
  local problems = {}
  for name, value in pairs(system) do
    if type(value) == "function" and not catalog.system[name] then
      problems[#problems + 1] = ("gpurun.system.%s is not in spec/support/api_catalog.lua"):format(name)
    end
  end
  for name in pairs(catalog.system) do
    if type(system[name]) ~= "function" then
      problems[#problems + 1] = ("the catalog lists gpurun.system.%s, which gpurun.system does not have")
        :format(name)
    end
  end
  table.sort(problems)
  return problems
end

-- What the dist module really holds, compared with catalog.dist: a list of
-- lines naming each difference.
function catalog.dist_differences(dist)
  local problems = {}
  for name, value in pairs(dist) do
    if type(value) == "function" and not catalog.dist[name] then
      problems[#problems + 1] = ("dist.%s is not in spec/support/api_catalog.lua"):format(name)
    end
  end
  for name in pairs(catalog.dist) do
    if type(dist[name]) ~= "function" then
      problems[#problems + 1] = ("the catalog lists dist.%s, which gpurun.dist does not have"):format(name)
    end
  end
  table.sort(problems)
  return problems
end

-- A pipeline's methods (gpurun.pipeline's objects: the one-device type and
-- the split one have the same names), with what kind of value every
-- argument is: pipeline_name (a name to declare or to look up),
-- pipeline_buffer (what p:buffer takes), buffer_list (p:buffers' table),
-- pipeline_data (a declared data's name, a buffer, or anything),
-- pipeline_arg (what a stage passes: data, scalars' names, numbers,
-- anything), pipeline_value (a number for a scalar or a fill),
-- pipeline_dtype, kernel_object (an elementwise kernel, or what is not
-- one), buffer_options (p:buffer's), stage_options ({ name =, reads =,
-- writes = }), plan_options (p:plan's), pipeline_matrix (a 2-D view whose
-- buffer is a pipeline_data), pipeline_matmul_options (p:matmul's, its
-- epilogue from matmul_epilogue, its bias a pipeline_data),
-- pipeline_sort_options (p:sort's), pipeline_fft_options (p:fft's),
-- pipeline_csr (p:spmv's A: a table of pipeline_data parts, or anything),
-- pipeline_spmv_options (p:spmv's), and the kinds above.
-- takes_nothing: nothing it could refuse on a machine without a GPU.
-- runs: it launches the pipeline's stages (the fuzzer runs only pipelines
-- that launch no raw kernel, whose arguments no guard has looked at).
catalog.pipeline = {
  buffer = { args = { "pipeline_name", "pipeline_buffer", "buffer_options" } },
  buffers = { args = { "buffer_list" } },
  temporary = { args = { "pipeline_name", "count", "pipeline_dtype" } },
  view = { args = { "pipeline_name", "pipeline_data", "first", "range_count" } },
  scalar = { args = { "pipeline_name", "pipeline_value", "pipeline_dtype" } },
  call = { args = { "kernel_object", "pipeline_arg", "..." } },
  launch = { args = { "kernel", "config", "pipeline_arg", "..." } },
  copy = { args = { "pipeline_data", "pipeline_data", "stage_options" } },
  fill = { args = { "pipeline_data", "pipeline_value", "stage_options" } },
  host = { args = { "host_function", "stage_options" } },
  matmul = { args = { "pipeline_matrix", "pipeline_matrix", "pipeline_matrix", "pipeline_matmul_options" } },
  sort = { args = { "pipeline_data", "pipeline_sort_options" } },
  fft = { args = { "pipeline_data", "pipeline_data", "pipeline_fft_options" } },
  spmv = { args = { "pipeline_csr", "pipeline_data", "pipeline_data", "pipeline_spmv_options" } },
  plan = { args = { "plan_options" } },
  explain = { args = {} },
  to_dot = { args = { "dot_options" } },
  run = { args = { "stream" }, runs = true },
  graph = { args = { "stream" }, runs = true },
  wait = { args = {}, takes_nothing = true },
  set = { args = { "pipeline_name", "pipeline_value" } },
  timings = { args = {} },
  close = { args = {}, takes_nothing = true },
}

-- What a pipeline really holds, compared with catalog.pipeline: a list of
-- lines naming each difference (pipeline: a live one).
function catalog.pipeline_differences(pipeline)
  local problems = {}
  local methods = getmetatable(pipeline).__index
  for name, value in pairs(methods) do
    if type(value) == "function" and type(name) == "string" and not name:match("^__")
        and not catalog.pipeline[name] then
      problems[#problems + 1] = ("pipeline:%s is not in spec/support/api_catalog.lua"):format(name)
    end
  end
  for name in pairs(catalog.pipeline) do
    if type(methods[name]) ~= "function" then
      problems[#problems + 1] = ("the catalog lists pipeline:%s, which a pipeline does not have")
        :format(name)
    end
  end
  table.sort(problems)
  return problems
end

-- Sorted string keys, so that anything drawn from the catalog is drawn in the
-- same order on every run (pairs() order changes between processes).
local function sorted_keys(t)
  local keys = {}
  for key in pairs(t) do
    if type(key) == "string" then keys[#keys + 1] = key end
  end
  table.sort(keys)
  return keys
end
catalog.sorted_keys = sorted_keys

-- Every callable entry: { kind = "function" | "method" | "metamethod",
-- type = "Buffer" (methods), name = "fill", label = "Buffer:fill", spec }.
function catalog.entries()
  local list = {}
  for _, name in ipairs(sorted_keys(catalog.functions)) do
    list[#list + 1] = { kind = "function", name = name, label = "gpurun." .. name,
      spec = catalog.functions[name] }
  end
  for _, type_name in ipairs(sorted_keys(catalog.type_functions)) do
    for _, name in ipairs(sorted_keys(catalog.type_functions[type_name])) do
      list[#list + 1] = { kind = "function", name = type_name .. "." .. name,
        label = "gpurun." .. type_name .. "." .. name, spec = catalog.type_functions[type_name][name] }
    end
  end
  for _, type_name in ipairs(catalog.types) do
    for _, name in ipairs(sorted_keys(catalog.methods[type_name])) do
      list[#list + 1] = { kind = "method", type = type_name, name = name,
        label = type_name .. ":" .. name, spec = catalog.methods[type_name][name] }
    end
    for _, name in ipairs(catalog.metamethods[type_name] or {}) do
      list[#list + 1] = { kind = "metamethod", type = type_name, name = name,
        label = type_name .. "." .. name, spec = { args = { "any" } } }
    end
  end
  return list
end

-- The metatable of gpurun.<type_name>, straight from the registry.
function catalog.metatable(type_name)
  return debug.getregistry()["gpurun." .. type_name]
end

-- The function an entry names, looked up in the live module and registry.
function catalog.resolve(gpurun, entry)
  if entry.kind == "function" then
    local type_name, name = entry.name:match("^(%a%w*)%.([%w_]+)$")
    if type_name then return type(gpurun[type_name]) == "table" and gpurun[type_name][name] or nil end
    return gpurun[entry.name]
  end
  local metatable = catalog.metatable(entry.type)
  if not metatable then return nil end
  if entry.kind == "method" then return metatable.methods and metatable.methods[entry.name] end
  return metatable[entry.name]
end

-- The gpurun type name ("Buffer") of a value, or nil. Types written in C are
-- userdata; ProgramOptions, written in Lua, is a table.
function catalog.type_of(value)
  local metatable = getmetatable(value)
  if (type(value) ~= "userdata" and type(value) ~= "table") or type(metatable) ~= "table" then
    return nil
  end
  local name = rawget(metatable, "__name")
  if type(name) ~= "string" then return nil end
  local type_name = name:match("^gpurun%.(%u%w*)$")
  if type_name and debug.getregistry()[name] == metatable then return type_name end
  return nil
end

-- What the loaded module and registry really hold, compared with the
-- catalog: a list of lines naming each difference (empty when they agree).
function catalog.differences(gpurun)
  local problems = {}
  local function problem(...) problems[#problems + 1] = string.format(...) end
  -- A function, or a type's table of constructors that calls like one
  -- (gpurun.Event{...} beside gpurun.Event.from_ipc).
  local function callable(value)
    local meta = type(value) == "table" and getmetatable(value)
    return type(value) == "function"
      or (type(meta) == "table" and type(rawget(meta, "__call")) == "function")
  end
  for _, name in ipairs(sorted_keys(gpurun)) do
    if callable(gpurun[name]) and not catalog.functions[name] then
      problem("gpurun.%s is not in spec/support/api_catalog.lua", name)
    end
  end
  for _, name in ipairs(sorted_keys(catalog.functions)) do
    if not callable(gpurun[name]) then
      problem("the catalog lists gpurun.%s, which the module does not have", name)
    end
  end
  for _, type_name in ipairs(sorted_keys(gpurun)) do
    local functions = gpurun[type_name]
    if type(functions) == "table" and (type_name:match("^%u") or catalog.type_functions[type_name]) then
      local listed = catalog.type_functions[type_name] or {}
      for _, name in ipairs(sorted_keys(functions)) do
        if type(functions[name]) == "function" and not listed[name] then
          problem("gpurun.%s.%s is not in spec/support/api_catalog.lua", type_name, name)
        end
      end
    end
  end
  for _, type_name in ipairs(sorted_keys(catalog.type_functions)) do
    for _, name in ipairs(sorted_keys(catalog.type_functions[type_name])) do
      if type(gpurun[type_name]) ~= "table" or type(gpurun[type_name][name]) ~= "function" then
        problem("the catalog lists gpurun.%s.%s, which the module does not have", type_name, name)
      end
    end
  end
  local known = {}
  for _, type_name in ipairs(catalog.types) do known[type_name] = true end
  local registry = debug.getregistry()
  for _, key in ipairs(sorted_keys(registry)) do
    local type_name = type(key) == "string" and key:match("^gpurun%.(%u%w*)$")
    if type_name and type(registry[key]) == "table" and type(registry[key].methods) == "table"
        and not known[type_name] and not catalog.internal_types[type_name] then
      problem("type gpurun.%s is not in spec/support/api_catalog.lua", type_name)
    end
  end
  for _, type_name in ipairs(catalog.types) do
    local metatable = registry["gpurun." .. type_name]
    if type(metatable) ~= "table" or type(metatable.methods) ~= "table" then
      problem("the catalog lists type gpurun.%s, which is not registered", type_name)
    else
      for _, name in ipairs(sorted_keys(metatable.methods)) do
        if not catalog.methods[type_name][name] then
          problem("method gpurun.%s:%s is not in spec/support/api_catalog.lua", type_name, name)
        end
      end
      for _, name in ipairs(sorted_keys(catalog.methods[type_name])) do
        if type(metatable.methods[name]) ~= "function" then
          problem("the catalog lists gpurun.%s:%s, which the type does not have", type_name, name)
        end
      end
      local listed = { __gc = true }
      for _, name in ipairs(catalog.metamethods[type_name] or {}) do
        listed[name] = true
        if type(metatable[name]) ~= "function" then
          problem("the catalog lists metamethod gpurun.%s.%s, which the type does not have",
            type_name, name)
        end
      end
      for _, name in ipairs(sorted_keys(metatable)) do
        if type(metatable[name]) == "function" and not listed[name] then
          problem("metamethod gpurun.%s.%s is not in spec/support/api_catalog.lua", type_name, name)
        end
      end
    end
  end
  return problems
end

return catalog
