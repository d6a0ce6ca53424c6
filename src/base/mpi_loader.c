/* The MPI loader: dlopen, one table of entry points by name, the world's
 * handles for the ABI found, one error formatter. Each call that takes a
 * handle is made through the function type of that ABI: Open MPI's handles
 * are pointers, MPICH's are ints. */
#define _GNU_SOURCE /* on_exit: the exit status decides whether to finalise */
#include "base/mpi_loader.h"
#include "base/library_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MPI_SUCCESS_CODE 0
#define MPI_THREAD_SINGLE_LEVEL 0 /* the same in both ABIs */
#define VERSION_TEXT_SIZE 8192    /* past either library's MPI_MAX_LIBRARY_VERSION_STRING */
#define ERROR_TEXT_SIZE 1024      /* past either library's MPI_MAX_ERROR_STRING */

/* MPICH's predefined handles (mpi.h of MPICH 3 and 4). */
#define MPICH_COMM_WORLD 0x44000000
#define MPICH_BYTE 0x4c00010d
#define MPICH_INFO_NULL 0x1c000000
#define MPICH_ERRORS_RETURN 0x54000001
#define MPICH_COMM_TYPE_SHARED 1
/* Open MPI's MPI_COMM_TYPE_SHARED: the first of its split types. */
#define OPEN_MPI_COMM_TYPE_SHARED 0

static struct {
#define MPI_MEMBER(name) void *name;
    MPI_ENTRY_POINTS(MPI_MEMBER)
#undef MPI_MEMBER
} mpi;

static struct library_loader library;

static struct {
    int started_here, finalised;
    enum mpi_flavour flavour;
    /* Open MPI: the addresses of its predefined objects. */
    void *comm_world, *byte, *info_null, *errors_return;
    char version[VERSION_TEXT_SIZE];
    const char *failed_call;
    int failed_code;
} loader;

static const struct library_symbol entry_points[] = {
#define MPI_ENTRY(name) {#name, offsetof(__typeof__(mpi), name)},
    MPI_ENTRY_POINTS(MPI_ENTRY)
#undef MPI_ENTRY
};

/* Function types, Open MPI's (pointer handles) and MPICH's (int handles). */
typedef int (*status_fn)(int *);
typedef int (*init_thread_fn)(int *, char ***, int, int *);
typedef int (*finalize_fn)(void);
typedef int (*error_string_fn)(int, char *, int *);
typedef int (*comm_int_ompi)(void *, int *);
typedef int (*comm_int_mpich)(int, int *);
typedef int (*comm_ompi)(void *);
typedef int (*comm_mpich)(int);
typedef int (*bcast_ompi)(void *, int, void *, int, void *);
typedef int (*bcast_mpich)(void *, int, int, int, int);
typedef int (*split_type_ompi)(void *, int, int, void *, void **);
typedef int (*split_type_mpich)(int, int, int, int, int *);
typedef int (*comm_free_ompi)(void **);
typedef int (*comm_free_mpich)(int *);
typedef int (*set_errhandler_ompi)(void *, void *);
typedef int (*set_errhandler_mpich)(int, int);

const char *mpi_flavour_name(enum mpi_flavour flavour)
{
    switch (flavour) {
    case MPI_FLAVOUR_OPEN_MPI: return "Open MPI";
    case MPI_FLAVOUR_MPICH: return "MPICH";
    default: return "none";
    }
}

static int checked(int code, const char *call)
{
    if (code != MPI_SUCCESS_CODE) {
        loader.failed_call = call;
        loader.failed_code = code;
    }
    return code;
}

static int load_failed(const char *fmt, const char *detail)
{
    return library_loader_fail(&library, &mpi, sizeof mpi, fmt, detail);
}

#define INSTALL_HINT                                                                      \
    "install Open MPI (Debian: apt-get install openmpi-bin libopenmpi3) or MPICH (mpich " \
    "libmpich12), or set GPURUN_MPI_LIBRARY to the library's path"

/* Opens the first library that loads; RTLD_GLOBAL, since Open MPI's
 * components (dlopened by libmpi itself) resolve symbols of libmpi. */
static void *open_library(char *why, size_t size)
{
    const char *chosen = getenv("GPURUN_MPI_LIBRARY");
    if (chosen && *chosen) {
        void *library = dlopen(chosen, RTLD_NOW | RTLD_GLOBAL);
        if (!library)
            snprintf(why, size, "%s", dlerror());
        return library;
    }
    /* Under a PMI launcher that is not Open MPI's (MPICH's Hydra, Intel
     * MPI, srun), an MPICH-ABI library first: the launcher can only start
     * its own kind. */
    static const char *const open_mpi_first[] = {"libmpi.so.40", "libmpi.so.12", "libmpich.so.12"};
    static const char *const mpich_first[] = {"libmpi.so.12", "libmpich.so.12", "libmpi.so.40"};
    int pmi = getenv("OMPI_COMM_WORLD_SIZE") == NULL
              && (getenv("PMI_SIZE") != NULL || getenv("PMI_RANK") != NULL);
    const char *const *names = pmi ? mpich_first : open_mpi_first;
    why[0] = '\0';
    for (size_t i = 0; i < 3; i++) {
        void *library = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
        if (library)
            return library;
        if (i == 0)
            snprintf(why, size, "%s", dlerror());
    }
    size_t used = strlen(why);
    snprintf(why + used, size - used, pmi ? "; nor libmpich.so.12 or libmpi.so.40 (Open MPI)"
                                          : "; nor libmpi.so.12 or libmpich.so.12 (MPICH)");
    return NULL;
}

/* Which ABI the library speaks: Open MPI's predefined objects are symbols;
 * MPICH and its derivatives name themselves in their version text. */
static int find_flavour(void)
{
    loader.comm_world = dlsym(library.handle, "ompi_mpi_comm_world");
    if (loader.comm_world) {
        loader.byte = dlsym(library.handle, "ompi_mpi_byte");
        loader.info_null = dlsym(library.handle, "ompi_mpi_info_null");
        loader.errors_return = dlsym(library.handle, "ompi_mpi_errors_return");
        if (!loader.byte || !loader.info_null || !loader.errors_return)
            return load_failed("MPI could not be used: %s",
                               "the library has ompi_mpi_comm_world but not all of ompi_mpi_byte, "
                               "ompi_mpi_info_null and ompi_mpi_errors_return");
        loader.flavour = MPI_FLAVOUR_OPEN_MPI;
        return 0;
    }
    if (strstr(loader.version, "MPICH") || strstr(loader.version, "Intel(R) MPI")
        || strstr(loader.version, "MVAPICH")) {
        loader.flavour = MPI_FLAVOUR_MPICH;
        return 0;
    }
    return load_failed("MPI could not be used: the library is neither Open MPI nor of "
                       "MPICH's ABI (it says: %.300s); " INSTALL_HINT, loader.version);
}

int mpi_loader_load(void)
{
    if (library.attempted)
        return library.result;
    library.attempted = 1;
    char why[512];
    library.handle = open_library(why, sizeof why);
    if (!library.handle)
        return load_failed("MPI could not be loaded (%s); " INSTALL_HINT, why);
    const char *missing = library_loader_resolve(&library, &mpi, entry_points,
                                                 sizeof entry_points / sizeof entry_points[0]);
    if (missing)
        return load_failed("MPI could not be loaded: the library has no %s (an MPI older than "
                           "MPI-3?)", missing);
    /* MPI-3 allows this one before MPI_Init. */
    int length = 0;
    typedef int (*version_fn)(char *, int *);
    if (((version_fn)mpi.MPI_Get_library_version)(loader.version, &length) != MPI_SUCCESS_CODE)
        snprintf(loader.version, sizeof loader.version, "(no version)");
    loader.version[strcspn(loader.version, "\n")] = '\0';
    if (find_flavour() != 0)
        return -1;
    library.result = 0;
    return 0;
}

const char *mpi_loader_error(void)
{
    return library.error;
}

enum mpi_flavour mpi_loader_flavour(void)
{
    return library.result == 0 ? loader.flavour : MPI_FLAVOUR_NONE;
}

const char *mpi_library_version(void)
{
    return loader.version;
}

static int is_open_mpi(void)
{
    return loader.flavour == MPI_FLAVOUR_OPEN_MPI;
}

static void finalise_at_exit(int status, void *unused)
{
    (void)unused;
    int finalised = 1;
    if (status != 0 || loader.finalised || !mpi.MPI_Finalized)
        return;
    if (((status_fn)mpi.MPI_Finalized)(&finalised) == MPI_SUCCESS_CODE && !finalised)
        ((finalize_fn)mpi.MPI_Finalize)();
    loader.finalised = 1;
}

int mpi_start(void)
{
    int initialised = 0;
    int code = checked(((status_fn)mpi.MPI_Initialized)(&initialised), "MPI_Initialized");
    if (code != MPI_SUCCESS_CODE || initialised)
        return code;
    int provided = 0;
    code = checked(((init_thread_fn)mpi.MPI_Init_thread)(NULL, NULL, MPI_THREAD_SINGLE_LEVEL,
                                                        &provided), "MPI_Init_thread");
    if (code != MPI_SUCCESS_CODE)
        return code;
    if (!loader.started_here) {
        loader.started_here = 1;
        on_exit(finalise_at_exit, NULL);
    }
    /* Errors come back as codes, to be raised as Lua errors, instead of
     * ending the process from inside MPI. */
    if (is_open_mpi())
        return checked(((set_errhandler_ompi)mpi.MPI_Comm_set_errhandler)(
                           loader.comm_world, loader.errors_return), "MPI_Comm_set_errhandler");
    return checked(((set_errhandler_mpich)mpi.MPI_Comm_set_errhandler)(MPICH_COMM_WORLD,
                                                                       MPICH_ERRORS_RETURN),
                   "MPI_Comm_set_errhandler");
}

static int world_int(void *function, int *out, const char *call)
{
    if (is_open_mpi())
        return checked(((comm_int_ompi)function)(loader.comm_world, out), call);
    return checked(((comm_int_mpich)function)(MPICH_COMM_WORLD, out), call);
}

int mpi_world_rank(int *rank)
{
    return world_int(mpi.MPI_Comm_rank, rank, "MPI_Comm_rank");
}

int mpi_world_size(int *size)
{
    return world_int(mpi.MPI_Comm_size, size, "MPI_Comm_size");
}

int mpi_world_barrier(void)
{
    if (is_open_mpi())
        return checked(((comm_ompi)mpi.MPI_Barrier)(loader.comm_world), "MPI_Barrier");
    return checked(((comm_mpich)mpi.MPI_Barrier)(MPICH_COMM_WORLD), "MPI_Barrier");
}

int mpi_world_broadcast(void *bytes, int count, int root)
{
    if (is_open_mpi())
        return checked(((bcast_ompi)mpi.MPI_Bcast)(bytes, count, loader.byte, root,
                                                   loader.comm_world), "MPI_Bcast");
    return checked(((bcast_mpich)mpi.MPI_Bcast)(bytes, count, MPICH_BYTE, root,
                                                MPICH_COMM_WORLD), "MPI_Bcast");
}

/* Splits the world by shared memory (one communicator per node), asks the
 * rank in it, frees it. */
int mpi_node_rank(int *rank)
{
    int code;
    if (is_open_mpi()) {
        void *node = NULL;
        code = checked(((split_type_ompi)mpi.MPI_Comm_split_type)(
                           loader.comm_world, OPEN_MPI_COMM_TYPE_SHARED, 0, loader.info_null,
                           &node), "MPI_Comm_split_type");
        if (code != MPI_SUCCESS_CODE)
            return code;
        code = checked(((comm_int_ompi)mpi.MPI_Comm_rank)(node, rank), "MPI_Comm_rank");
        int freed = checked(((comm_free_ompi)mpi.MPI_Comm_free)(&node), "MPI_Comm_free");
        return code != MPI_SUCCESS_CODE ? code : freed;
    }
    int node = 0;
    code = checked(((split_type_mpich)mpi.MPI_Comm_split_type)(
                       MPICH_COMM_WORLD, MPICH_COMM_TYPE_SHARED, 0, MPICH_INFO_NULL, &node),
                   "MPI_Comm_split_type");
    if (code != MPI_SUCCESS_CODE)
        return code;
    code = checked(((comm_int_mpich)mpi.MPI_Comm_rank)(node, rank), "MPI_Comm_rank");
    int freed = checked(((comm_free_mpich)mpi.MPI_Comm_free)(&node), "MPI_Comm_free");
    return code != MPI_SUCCESS_CODE ? code : freed;
}

char *mpi_format_error(char *buffer, size_t size)
{
    char text[ERROR_TEXT_SIZE] = "";
    int length = 0;
    if (!mpi.MPI_Error_string
        || ((error_string_fn)mpi.MPI_Error_string)(loader.failed_code, text, &length)
               != MPI_SUCCESS_CODE)
        snprintf(text, sizeof text, "no description");
    snprintf(buffer, size, "%s: MPI error %d (%s)",
             loader.failed_call ? loader.failed_call : "MPI", loader.failed_code, text);
    return buffer;
}
