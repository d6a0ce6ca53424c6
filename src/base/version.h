/* gpurun's version: the module's gpurun.version, `gpurun -v`, and a part of
 * every kernel cache key. */
#ifndef GPURUN_BASE_VERSION_H
#define GPURUN_BASE_VERSION_H

#define GPURUN_VERSION "0.1.0"

#endif
