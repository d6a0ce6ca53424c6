/* Following a program's #include lines to every file they could name.
 *
 * NVRTC cannot list a program's dependencies, so the kernel cache hashes
 * every file an #include could resolve to (in the including file's
 * directory, the working directory and each include path), path and
 * contents, as this walk finds them. That over-approximates (an unrelated
 * same-named header changes the key) but can never miss a header NVRTC
 * reads. An #include that cannot be followed (a macro, say) makes the walk
 * fail, and the program uncacheable. */
#define _GNU_SOURCE /* asprintf, strndup */
#include "base/include_scan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/read_file.h"

#define MAX_FOLLOWED_HEADERS 256
#define MAX_INCLUDE_DEPTH 64

/* "dir/name"; the caller frees. */
static char *join_path(const char *dir, const char *name)
{
    char *path = NULL;
    return asprintf(&path, "%s/%s", dir, name) < 0 ? NULL : path;
}

/* The directory part of a path, "." when it has none; the caller frees. */
static char *directory_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

struct include_walk {
    include_visit visit;
    void *context;
    const char *search_dirs[64];
    size_t search_dir_count;
    char *visited[MAX_FOLLOWED_HEADERS];
    size_t visited_count;
    int followable;
};

static void follow_text(struct include_walk *walk, const char *text, size_t size,
                        const char *including_dir, int depth);

static void follow_candidate(struct include_walk *walk, char *path, int depth)
{
    for (size_t i = 0; i < walk->visited_count; i++) {
        if (strcmp(walk->visited[i], path) == 0) {
            free(path);
            return;
        }
    }
    unsigned char *text = NULL;
    size_t size = 0;
    int error = read_whole_file(path, 0, &text, &size);
    if (error == ENOENT || error == ENOTDIR || error == READ_FILE_NOT_REGULAR) {
        free(path);
        return; /* not a candidate; if one appears, the key changes */
    }
    if (error || walk->visited_count == MAX_FOLLOWED_HEADERS || depth > MAX_INCLUDE_DEPTH) {
        walk->followable = 0;
        free(text);
        free(path);
        return;
    }
    walk->visited[walk->visited_count++] = path;
    walk->visit(walk->context, path, text, size);
    char *dir = directory_of(path);
    if (dir)
        follow_text(walk, (const char *)text, size, dir, depth + 1);
    else
        walk->followable = 0;
    free(dir);
    free(text);
}

/* Hashes every file the name could resolve to, whichever NVRTC picks. */
static void follow_include(struct include_walk *walk, const char *name,
                           const char *including_dir, int depth)
{
    if (name[0] == '/') {
        char *path = strdup(name);
        if (path)
            follow_candidate(walk, path, depth);
        else
            walk->followable = 0;
        return;
    }
    const char *dirs[2 + sizeof walk->search_dirs / sizeof walk->search_dirs[0]];
    size_t count = 0;
    dirs[count++] = including_dir;
    dirs[count++] = ".";
    for (size_t i = 0; i < walk->search_dir_count; i++)
        dirs[count++] = walk->search_dirs[i];
    for (size_t i = 0; i < count && walk->followable; i++) {
        char *path = join_path(dirs[i], name);
        if (path)
            follow_candidate(walk, path, depth);
        else
            walk->followable = 0;
    }
}

static int is_identifier_char(char c)
{
    return c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

/* One line: `# include "x"` or `# include <x>`. Comments and #if are not
 * understood, which only ever adds files to the key. */
static void follow_line(struct include_walk *walk, const char *p, const char *end,
                        const char *including_dir, int depth)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p++ != '#')
        return;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (end - p < 7 || memcmp(p, "include", 7) != 0 || (end - p > 7 && is_identifier_char(p[7])))
        return;
    p += 7;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    char close = p < end && *p == '"' ? '"' : p < end && *p == '<' ? '>' : 0;
    const char *name_end = close ? memchr(p + 1, close, (size_t)(end - p - 1)) : NULL;
    if (!name_end || name_end == p + 1) {
        walk->followable = 0; /* #include MACRO: where it leads is NVRTC's secret */
        return;
    }
    char *name = strndup(p + 1, (size_t)(name_end - p - 1));
    if (!name) {
        walk->followable = 0;
        return;
    }
    follow_include(walk, name, including_dir, depth);
    free(name);
}

static void follow_text(struct include_walk *walk, const char *text, size_t size,
                        const char *including_dir, int depth)
{
    const char *end = text + size;
    for (const char *line = text; line < end && walk->followable;) {
        const char *line_end = memchr(line, '\n', (size_t)(end - line));
        if (!line_end)
            line_end = end;
        follow_line(walk, line, line_end, including_dir, depth);
        line = line_end + 1;
    }
}

static const char *option_value(const char *option, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(option, prefix, n) == 0 ? option + n : NULL;
}

int include_scan(const struct nvrtc_request *request, include_visit visit, void *context)
{
    struct include_walk walk = {.visit = visit, .context = context, .followable = 1};
    for (size_t i = 0; i < request->option_count; i++) {
        const char *option = request->options[i];
        const char *dir = option_value(option, "--include-path=");
        if (!dir)
            dir = option_value(option, "-I");
        if (!dir || !*dir)
            continue;
        if (walk.search_dir_count == sizeof walk.search_dirs / sizeof walk.search_dirs[0])
            return 0;
        walk.search_dirs[walk.search_dir_count++] = dir;
    }
    char *top_dir = directory_of(request->name);
    if (!top_dir)
        return 0;
    for (size_t i = 0; i < request->option_count && walk.followable; i++) {
        const char *header = option_value(request->options[i], "--pre-include=");
        if (!header)
            header = option_value(request->options[i], "-include=");
        if (header)
            follow_include(&walk, header, top_dir, 0);
    }
    if (walk.followable)
        follow_text(&walk, request->source, strlen(request->source), top_dir, 0);
    free(top_dir);
    for (size_t i = 0; i < walk.visited_count; i++)
        free(walk.visited[i]);
    return walk.followable;
}
