/* A sandbox's writable layer captured as a read-only layer (docs/decisions/0048).
 *
 * layer_copy() copies the upper layer of an overlay (regular files, directories, symlinks,
 * fifos, the 0/0 character devices that overlay writes as whiteouts, and every xattr, so
 * the "user.overlay.*" opaque and redirect marks survive) into a new directory. Regular
 * files are cloned (FICLONE) where the filesystem shares extents, copied otherwise (holes
 * kept). Owners are shifted: an id in [from, from + count) becomes id - from, i.e. the
 * copy is stored in the ids of the sandbox's own namespace, and each sandbox started from
 * it sees it through an idmapped mount of its own, like the image. Nothing of the source
 * is followed: every name is opened relative to its directory with O_NOFOLLOW. */
#ifndef CELLA_RUNTIME_LAYER_H
#define CELLA_RUNTIME_LAYER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct layer_copy_stats {
        uint64_t bytes;  /* bytes of regular files (apparent size) */
        uint64_t files;  /* entries copied */
        uint64_t cloned; /* regular files cloned by FICLONE */
        uint64_t copied; /* regular files copied byte by byte */
        /* runtime_container_snapshot: the sandbox's disk image was cloned whole (reflink,
         * docs/decisions/0051) into <name>/disk.img instead of its upper layer being
         * copied; bytes is then the clone's allocated bytes, files 0. */
        bool disk_cloned;
};

/* Shift an owner id of the source into the copy's: id - from when in [from, from + count),
 * otherwise the overflow id 65534 (an id that is not the sandbox's never becomes one of
 * another sandbox's). Pure. */
uint32_t layer_shift_id(uint32_t id, uint32_t from, uint32_t count);

/* Copy the tree at src_fd (a directory) into dst_parent_fd/name, which must not exist.
 * Returns 0 or -errno; on failure the partial copy is left for the caller to remove. */
int layer_copy(int src_fd, int dst_parent_fd, const char *name, uint32_t from, uint32_t count,
               struct layer_copy_stats *stats);

/* Remove the tree dir_fd/name (a layer or a partial copy); ENOENT is success. */
int layer_remove(int dir_fd, const char *name);

#endif
