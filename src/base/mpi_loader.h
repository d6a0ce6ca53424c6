/* MPI, opened on first use. gpurun never links an MPI library: the first
 * dist.init() under a launcher dlopen()s one and takes the few entry points
 * it needs by their ABI names into one table, so that gpurun runs
 * everything else on a machine without MPI. Callers never see a handle:
 * this layer offers the operations gpurun needs on the world communicator.
 * Knows nothing about Lua. */
#ifndef GPURUN_BASE_MPI_LOADER_H
#define GPURUN_BASE_MPI_LOADER_H

#include <stddef.h>

/* The two ABIs spoken, told apart when the library is opened:
 *
 *   Open MPI (libmpi.so.40)  handles are addresses of link-time objects
 *                            (MPI_COMM_WORLD is &ompi_mpi_comm_world)
 *   MPICH (libmpi.so.12)     handles are integer constants (0x44000000);
 *                            also Intel MPI, MVAPICH and Cray MPICH */
enum mpi_flavour { MPI_FLAVOUR_NONE, MPI_FLAVOUR_OPEN_MPI, MPI_FLAVOUR_MPICH };

/* Every entry point gpurun uses, by the name both ABIs export. */
#define MPI_ENTRY_POINTS(X)                                                        \
    X(MPI_Initialized) X(MPI_Finalized) X(MPI_Init_thread) X(MPI_Finalize)        \
    X(MPI_Comm_rank) X(MPI_Comm_size) X(MPI_Comm_split_type) X(MPI_Comm_free)     \
    X(MPI_Barrier) X(MPI_Bcast) X(MPI_Comm_set_errhandler) X(MPI_Error_string)                  \
    X(MPI_Get_library_version)

/* Opens the library ($GPURUN_MPI_LIBRARY, else libmpi.so.40, libmpi.so.12,
 * libmpich.so.12; MPICH's first under a PMI launcher other than Open MPI's)
 * and fills the table, once per process. 0 on success; on
 * failure -1 and the reason in mpi_loader_error(). */
int mpi_loader_load(void);
const char *mpi_loader_error(void);
enum mpi_flavour mpi_loader_flavour(void);
const char *mpi_flavour_name(enum mpi_flavour flavour);

/* Each returns MPI's error code (0: MPI_SUCCESS) and records which call
 * failed, for mpi_format_error. */
/* MPI_Init_thread unless MPI is initialised already. MPI started here is
 * finalised when the process exits with status 0; after a failure it is
 * not (MPI_Finalize waits for the other ranks, which may be waiting for
 * this one), and the launcher ends the job on the non-zero status. */
int mpi_start(void);
int mpi_world_rank(int *rank);
int mpi_world_size(int *size);
int mpi_node_rank(int *rank);              /* rank among the ranks on this node */
int mpi_world_barrier(void);
int mpi_world_broadcast(void *bytes, int count, int root);

/* The library's own description (MPI_Get_library_version), first line. */
const char *mpi_library_version(void);

/* The one place an MPI error code becomes text:
 *   "MPI_Barrier: MPI error 5 (MPI_ERR_COMM: invalid communicator)"
 * for the call that last failed. Returns buffer. */
char *mpi_format_error(char *buffer, size_t size);

#endif
