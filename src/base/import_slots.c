/* Redirecting a library's imports through its offset table
 * (base/import_slots.h).
 *
 * The library's dynamic section gives its symbols and relocations; each
 * JUMP_SLOT or GLOB_DAT relocation against a hooked, undefined symbol is a
 * slot to rewrite. A slot in the part made read-only after relocation
 * (PT_GNU_RELRO, for a library linked with -z now) is made writable for
 * the write and read-only again. */
#define _GNU_SOURCE /* dladdr1, dlvsym, RTLD_DL_LINKMAP */
#include "base/import_slots.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GLIBC__)

struct dynamic {
    const ElfW(Sym) *symbols;
    const char *strings;
    const ElfW(Rela) *plt, *other;
    size_t plt_count, other_count;
    const ElfW(Half) *versions;
    const ElfW(Verneed) *needed;
    size_t needed_count;
};

/* ld.so turns some of these addresses into run-time ones in place, not all. */
static const void *dynamic_address(const struct link_map *map, ElfW(Addr) value)
{
    return (const void *)(value >= map->l_addr ? value : value + map->l_addr);
}

static int read_dynamic(const struct link_map *map, struct dynamic *d)
{
    int plt_is_rela = 1;
    memset(d, 0, sizeof *d);
    for (const ElfW(Dyn) *e = map->l_ld; e->d_tag != DT_NULL; e++) {
        switch (e->d_tag) {
        case DT_SYMTAB: d->symbols = dynamic_address(map, e->d_un.d_ptr); break;
        case DT_STRTAB: d->strings = dynamic_address(map, e->d_un.d_ptr); break;
        case DT_JMPREL: d->plt = dynamic_address(map, e->d_un.d_ptr); break;
        case DT_PLTRELSZ: d->plt_count = e->d_un.d_val / sizeof(ElfW(Rela)); break;
        case DT_PLTREL: plt_is_rela = e->d_un.d_val == DT_RELA; break;
        case DT_RELA: d->other = dynamic_address(map, e->d_un.d_ptr); break;
        case DT_RELASZ: d->other_count = e->d_un.d_val / sizeof(ElfW(Rela)); break;
        case DT_VERSYM: d->versions = dynamic_address(map, e->d_un.d_ptr); break;
        case DT_VERNEED: d->needed = dynamic_address(map, e->d_un.d_ptr); break;
        case DT_VERNEEDNUM: d->needed_count = e->d_un.d_val; break;
        }
    }
    return d->symbols && d->strings && plt_is_rela;
}

/* The symbol version libnvrtc asks for ("GLIBC_2.2.5"), or NULL. */
static const char *symbol_version(const struct dynamic *d, size_t index)
{
    if (!d->versions || !d->needed)
        return NULL;
    ElfW(Half) version = d->versions[index] & 0x7fff;
    const ElfW(Verneed) *need = d->needed;
    for (size_t i = 0; version >= 2 && i < d->needed_count; i++) {
        const ElfW(Vernaux) *aux = (const void *)((const char *)need + need->vn_aux);
        for (unsigned j = 0; j < need->vn_cnt; j++) {
            if (aux->vna_other == version)
                return d->strings + aux->vna_name;
            aux = (const void *)((const char *)aux + aux->vna_next);
        }
        need = (const void *)((const char *)need + need->vn_next);
    }
    return NULL;
}

#define MAX_SLOTS 64
static struct {
    void **address;
    void *hook;
    void *original; /* what was there: a lazy-binding stub or the function */
} slots[MAX_SLOTS];
static size_t slot_count;

static char why_not[240];

/* Finds the library's slots for the hooked calls; returns NULL or why not. */
static const char *find_slots(const struct link_map *map, const struct dynamic *d,
                              const char *library, const struct import_hook *hooks,
                              size_t hook_count, const char *const *refused,
                              size_t refused_count)
{
    const ElfW(Rela) *tables[2] = {d->plt, d->other};
    size_t counts[2] = {d->plt_count, d->other_count};
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; tables[t] && i < counts[t]; i++) {
            const ElfW(Rela) *rela = &tables[t][i];
            unsigned long type = ELF64_R_TYPE(rela->r_info);
            size_t index = ELF64_R_SYM(rela->r_info);
            if (type == R_X86_64_RELATIVE || index == 0
                || d->symbols[index].st_shndx != SHN_UNDEF)
                continue;
            const char *name = d->strings + d->symbols[index].st_name;
            for (size_t u = 0; u < refused_count; u++)
                if (strcmp(name, refused[u]) == 0) {
                    snprintf(why_not, sizeof why_not, "%s calls %s, which gpurun does not watch",
                             library, name);
                    return why_not;
                }
            const struct import_hook *hook = NULL;
            for (size_t h = 0; h < hook_count; h++)
                if (strcmp(name, hooks[h].symbol) == 0)
                    hook = &hooks[h];
            if (!hook)
                continue;
            if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) {
                snprintf(why_not, sizeof why_not, "%s refers to %s in a way gpurun cannot redirect",
                         library, name);
                return why_not;
            }
            if (!*hook->real) {
                const char *version = symbol_version(d, index);
                *hook->real = version ? dlvsym(RTLD_DEFAULT, name, version)
                                      : dlsym(RTLD_DEFAULT, name);
                if (!*hook->real) {
                    snprintf(why_not, sizeof why_not, "the loader has no %s%s%s for %s", name,
                             version ? "@" : "", version ? version : "", library);
                    return why_not;
                }
            }
            void **address = (void **)(map->l_addr + rela->r_offset);
            size_t s = 0;
            while (s < slot_count && slots[s].address != address)
                s++;
            if (s == MAX_SLOTS)
                return "the library has more slots for the hooked calls than gpurun expects";
            if (s == slot_count) {
                slots[s].address = address;
                slots[s].hook = hook->hook;
                slot_count++;
            }
        }
    }
    return NULL;
}

struct relro {
    ElfW(Addr) base;
    uintptr_t start, end;
};

static int find_relro(struct dl_phdr_info *info, size_t size, void *context)
{
    struct relro *relro = context;
    (void)size;
    if (info->dlpi_addr != relro->base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
            relro->start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            relro->end = relro->start + info->dlpi_phdr[i].p_memsz;
        }
    return 1;
}

/* Writes each slot; a slot in the read-only-after-relocation part is made
 * writable for the write and read-only again. Returns 0 when mprotect
 * refuses. */
static int write_slots(const struct link_map *map, int restore)
{
    struct relro relro = {map->l_addr, 0, 0};
    dl_iterate_phdr(find_relro, &relro);
    uintptr_t page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (size_t s = 0; s < slot_count; s++) {
        uintptr_t at = (uintptr_t)slots[s].address;
        int protected = at >= relro.start && at < relro.end;
        void *page = (void *)(at & ~(page_size - 1));
        if (protected && mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0)
            return 0;
        if (!restore)
            slots[s].original = *slots[s].address;
        __atomic_store_n(slots[s].address, restore ? slots[s].original : slots[s].hook,
                         __ATOMIC_RELEASE);
        if (protected)
            mprotect(page, page_size, PROT_READ);
    }
    return 1;
}

static const struct link_map *redirected;

const char *import_slots_redirect(const void *address, const char *library,
                                  const struct import_hook *hooks, size_t hook_count,
                                  const char *const *refused, size_t refused_count)
{
    Dl_info info;
    struct link_map *map = NULL;
    struct dynamic d;
    if (redirected)
        return "import_slots_redirect was called twice";
    if (!dladdr1(address, &info, (void **)&map, RTLD_DL_LINKMAP) || !map) {
        snprintf(why_not, sizeof why_not, "gpurun cannot find %s among the loaded libraries",
                 library);
        return why_not;
    }
    if (!read_dynamic(map, &d)) {
        snprintf(why_not, sizeof why_not,
                 "%s's dynamic section lacks its symbol or relocation tables", library);
        return why_not;
    }
    const char *problem = find_slots(map, &d, library, hooks, hook_count, refused, refused_count);
    if (problem)
        return problem;
    if (!write_slots(map, 0)) {
        snprintf(why_not, sizeof why_not,
                 "mprotect refused to make %s's offset table writable (%s)", library,
                 strerror(errno));
        write_slots(map, 1);
        return why_not;
    }
    redirected = map;
    return NULL;
}

/* Where the library outlives this code (gpurun.so unloaded from a host that
 * loaded libnvrtc itself), its slots must not point into unmapped code. */
__attribute__((destructor)) static void put_back(void)
{
    if (redirected)
        write_slots(redirected, 1);
    redirected = NULL;
}

#else

const char *import_slots_redirect(const void *address, const char *library,
                                  const struct import_hook *hooks, size_t hook_count,
                                  const char *const *refused, size_t refused_count)
{
    (void)address, (void)library, (void)hooks, (void)hook_count, (void)refused,
        (void)refused_count;
    return "gpurun redirects a library's calls only on x86-64 with glibc";
}

#endif
