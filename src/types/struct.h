/* gpurun.Struct: a value of a StructLayout (types/struct_layout.c), the
 * bytes of a C struct packed as each field is set, which a kernel takes by
 * value where its PTX declares `.param .align A .b8 name[N]`. */
#ifndef GPURUN_TYPES_STRUCT_H
#define GPURUN_TYPES_STRUCT_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_struct_tag;

/* `count` elements of dtype at offset; `array`: declared with a count, so
 * read and set as a sequence. */
struct gpurun_struct_field {
    uint32_t offset;
    uint32_t count;
    int dtype;
    int array;
};

/* A StructLayout (its Lua type is types/struct_layout.c): the offsets C
 * gives the fields, the size and the alignment. Its user value 1 is a
 * table of name -> field number (from 1) and field number -> name. */
struct gpurun_struct_layout {
    struct gpurun_object header;
    size_t size;
    size_t align;
    int field_count;
    struct gpurun_struct_field fields[];
};

struct gpurun_struct {
    struct gpurun_object header;
    const struct gpurun_struct_layout *layout; /* user value 1, which keeps it */
    unsigned char bytes[];                     /* layout->size of them */
};

/* Pushes a new Struct of the StructLayout at layout_index, every byte zero,
 * then with the fields the table at values_index sets (0: none). */
struct gpurun_struct *gpurun_push_struct(lua_State *L, int layout_index, int values_index);

/* Whether a value has a member of this name (layout, bytes), which no
 * field may then be called. */
int gpurun_struct_member(const char *name);

void gpurun_open_struct(lua_State *L);

#endif
