/* A sandbox's memory sleep (docs/decisions/0050-memory-sleep.md): its whole process tree
 * checkpointed by CRIU into images in cellad's sandbox dir, and restored from them.
 *
 * runtime_checkpoint_dump() runs `criu dump` from the host on the PID 1 of a container
 * whose agent link cellad has closed: the veth goes first (a restored tree cannot rejoin
 * it; the slot's address stays), the mounts cellad binds into the sandbox (the host's
 * devices, /proc/keys and /proc/timer_list, the cgroup, the agent's executable) and the
 * agent's log are named external, and what they were is written beside the images
 * (CHECKPOINT_EXTERNALS). After a good dump CRIU has killed the tree.
 *
 * runtime_checkpoint_restore() rebuilds what a start builds for the sandbox's root in a
 * private mount namespace of a child of cellad (the disk, the image and any snapshot
 * layers idmapped with the sandbox's map, the overlay; a clone of cellad's copy of the
 * agent under a directory the sandbox's root may traverse; the host's cgroup hierarchies
 * bound into CRIU's cgroup yard), that child born in the cgroups of a start's plan (it
 * joins the v1 ones itself, as a start's child does), and execs `criu restore
 * --restore-detached`; the PID 1 it restores gets its veth again as a start gives it one.
 * A good dump leaves out the ip images that restore nothing (a namespace as a new one has
 * it), so that the restore runs no `ip`. */
#ifndef CELLA_RUNTIME_CHECKPOINT_H
#define CELLA_RUNTIME_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/limits.h"
#include "runtime/container.h"

/* Beside the images: what cellad named external at the dump (checkpoint_externals_parse). */
#define CHECKPOINT_EXTERNALS "cella-externals"
/* Where a restore's private mount namespace attaches the root and the agent (an empty
 * directory on the host, only ever a mount point inside such namespaces). */
#define CHECKPOINT_RESTORE_BASE "/run/cella-restore"

struct checkpoint_externals {
        char mounts[CELLA_CRIU_EXTERNALS_MAX][128]; /* mount points inside the sandbox */
        size_t n;
        char log[40]; /* "<mnt id>:<inode>" in hex: the agent's log as CRIU names it */
        /* the cgroups the agent made under the sandbox's v2 cgroup (sessions, terminals),
         * parents first, relative: CRIU puts the restored tasks back into them */
        char cgroups[CELLA_CRIU_CGROUPS_MAX][64];
        size_t n_cgroups;
};

/* Read text[0..len) (the CHECKPOINT_EXTERNALS file): lines "mnt <mount point>", "cg
 * <relative cgroup path>" (of [A-Za-z0-9_.-/], not starting with '/', without "..") and
 * one "log <hex>:<hex>". A mount point is /run/.cella/cella-init, /sys/fs/cgroup, or under
 * /dev/ or /proc/, of [A-Za-z0-9_./-] without "..". Returns 0 or -EINVAL. */
int checkpoint_externals_parse(const char *text, size_t len, struct checkpoint_externals *ret);

/* The reason in a CRIU log text[0..len): the message of its first "Error (file:line):"
 * line that is not one of the harmless ones every run prints (its own RLIMIT_NOFILE,
 * iptables, lo's addresses, a probe's exit status), else "". Control bytes become '?'.
 * Returns the length written into out (sz >= 1). */
size_t checkpoint_log_reason(const char *text, size_t len, char *out, size_t sz);

/* A memory fork's child (0050, "memory fork"): CRIU restores the user namespace with the
 * map in the images' userns-<id>.img, which is the parent's. checkpoint_userns_remap reads
 * such an image in[0..len) (the two magics, one entry: its u32 size and a userns_entry
 * message of uid_map and gid_map extents {first, lower_first, count}, nothing else) and
 * writes into out (outsz) the same image with every extent moved from the host range
 * [from, from + count) to [to, to + count): an extent outside that range, a field or wire
 * type the message does not have, more than CELLA_CRIU_USERNS_EXTENTS extents a map,
 * trailing bytes: -EINVAL. *ret_len: the bytes written. 0, -EINVAL or -ENOSPC. */
int checkpoint_userns_remap(const uint8_t *in, size_t len, uint32_t from, uint32_t to,
                            uint32_t count, uint8_t *out, size_t outsz, size_t *ret_len);

/* The host base of the uid map in a userns image (its extent of first 0): 0 or -EINVAL. */
int checkpoint_userns_base(const uint8_t *in, size_t len, uint32_t *ret_base);

/* Is the image file name[data, len) one whose restore restores nothing: a route-<n>.img or
 * route6-<n>.img that is exactly the 4-byte magic `ip route save` writes before its
 * messages, no route after it (the table of a namespace whose tenant added none)? The
 * dump removes those, so that the restore runs no `ip route restore` of nothing (CRIU
 * restores a missing ip image as an empty one). Anything else (another name, a route, a
 * short or longer file): false, the image is kept. */
bool checkpoint_ip_image_empty(const char *name, const uint8_t *data, size_t len);

/* Do the two `ip addr save` or `ip rule save` outputs a[0..alen) and b[0..blen) say the
 * same: the same 4-byte magic, then the same netlink messages in the same order, equal
 * byte for byte but for what says when and by which run they were dumped (each header's
 * sequence number and port id; an address's IFA_CACHEINFO, its timestamps, of the same
 * length)? A message or attribute whose length runs past its end, trailing bytes, more
 * than CHECKPOINT_IP_MESSAGES_MAX messages: false. The dump drops the ifaddr and rule
 * images that say what a new network namespace with lo up says (the sandbox's tenant
 * changed nothing there): CRIU restores lo up, whose addresses the kernel then gives it,
 * and a namespace's default rules, without its four execs of `ip` (addr restore, rule
 * flush, rule delete, rule restore). */
#define CHECKPOINT_IP_MESSAGES_MAX 256
bool checkpoint_ip_images_same(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

/* A restore's cgroup yard (0050, "the memory wake's time"): CRIU moves the restored tasks
 * through a directory with every cgroup hierarchy mounted under the name it gives it (the
 * controllers as /proc/self/cgroup lists them, "name=X" as X, the v2 one "unified"), and
 * mounts each one missing there itself: a new cgroup2 mount costs a restore 7 to 15 ms on
 * this host. The restore's child binds instead the host's own mounts of the hierarchies
 * found by checkpoint_yard_plan into the yard it gives CRIU (--cgroup-yard). */
#define CHECKPOINT_YARD_MAX 16
#define CHECKPOINT_YARD_NAME_MAX 64
struct checkpoint_yard {
        size_t n;
        char names[CHECKPOINT_YARD_MAX][CHECKPOINT_YARD_NAME_MAX];
};

/* From cgroup[0..clen) (/proc/self/cgroup: "id:controllers:path" lines) the yard name of
 * each hierarchy, kept in ret when mountinfo[0..mlen) (/proc/self/mountinfo) has a mount of
 * that hierarchy's root at <root>/<name>: cgroup2 for the v2 one; cgroup with each of the
 * line's controllers (and "name=X") among its super options for a v1 one. A hierarchy not
 * mounted so is left out (CRIU mounts it, as without a yard). 0, or -EINVAL for a cgroup
 * line that does not parse, a name of a character outside [A-Za-z0-9_.,=-] or too long,
 * more than CHECKPOINT_YARD_MAX hierarchies. */
int checkpoint_yard_plan(const char *cgroup, size_t clen, const char *mountinfo, size_t mlen,
                         const char *root, struct checkpoint_yard *ret);

/* How many sockets the process pid holds open (-errno). */
int checkpoint_sockets(pid_t pid);

/* Dump the container c (cgroup directory id, of network slot `slot` when network) whole into images (an empty
 * directory of cellad's). sockets_before: what checkpoint_sockets() said before cellad
 * closed its link to the agent; the dump waits (CELLA_CRIU_PEER_CLOSE_MS) for the agent
 * to have closed its end. 0: the tree is gone. -errno with *err (CRIU's first error): the
 * processes run on (without their veth when it was removed). */
int runtime_checkpoint_dump(struct runtime *rt, const char *id, const struct container *c,
                            bool network, unsigned slot, int sockets_before, const char *images,
                            struct cella_error *err);

/* A memory fork's dump (0050, "memory fork"): as runtime_checkpoint_dump, but the tree
 * runs on. The veth goes for the dump (the images must not hold it) and comes back
 * (net_sandbox_setup with allow, n_allow) whatever the dump did; the cgroup is frozen
 * before CRIU seizes the tree (`--freeze-cgroup`, which CRIU leaves frozen as it found
 * it) and is left FROZEN on success, so that the caller's files snapshot captures the
 * files of the same instant and thaws it; thawed on failure. Established TCP connections
 * are dumped (`--tcp-established`) so that the child's restore closes them. */
int runtime_checkpoint_dump_running(struct runtime *rt, const char *id, const struct container *c,
                                    bool network, unsigned slot, const struct net_allow *allow,
                                    size_t n_allow, int sockets_before, const char *images,
                                    struct cella_error *err);

/* Restore the container of spec from images (written by runtime_checkpoint_dump) as a
 * start would start it: *ret gets the restored PID 1 and its pidfd. -errno with *err; the
 * caller removes whatever is left in its cgroups. */
int runtime_checkpoint_restore(struct runtime *rt, const struct container_spec *spec,
                               const char *images, struct container *ret, struct cella_error *err);

#endif
