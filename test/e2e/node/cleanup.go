package node

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// mountsUnder returns the mount points at or below any of dirs, deepest
// first, from /proc/self/mountinfo.
func mountsUnder(dirs ...string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range dirs {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				mounts = append(mounts, mp)
				break
			}
		}
	}
	// Deepest first; a path mounted twice is unmounted twice.
	slices.SortStableFunc(mounts, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return mounts, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts everything mounted at or below dirs (the kubelet's
// volumes, containerd's rootfs and shm mounts), lazily where a plain
// unmount is refused, and errs if anything is left mounted.
func unmountUnder(dirs ...string) error {
	mounts, err := mountsUnder(dirs...)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if err := syscall.Unmount(m, 0); err != nil {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	left, err := mountsUnder(dirs...)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("still mounted: %s", strings.Join(left, ", "))
	}
	return nil
}

// removeUnmounted removes dirs once nothing is mounted below them; with a
// mount left it removes nothing, so that no file of a bind-mounted host
// directory is deleted.
func removeUnmounted(dirs ...string) error {
	if err := unmountUnder(dirs...); err != nil {
		return fmt.Errorf("not removing %s: %w", strings.Join(dirs, ", "), err)
	}
	var errs []error
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// removeCgroups removes the kubelet's cgroups (kubepods and everything in
// it) and those of containers started without the CRI (k8s.io, containerd's
// namespace, where `ctr run` puts them) from every cgroup hierarchy,
// deepest first. Only empty cgroups can go,
// so it runs after the containers are killed.
func removeCgroups() error {
	mounts, err := mountsOfType("cgroup", "cgroup2")
	if err != nil {
		return err
	}
	var roots []string
	for _, m := range mounts {
		roots = append(roots, filepath.Join(m, "kubepods"), filepath.Join(m, "k8s.io"))
	}
	var errs []error
	for _, top := range roots {
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// mountsOfType returns the mount points of filesystems of the given types.
func mountsOfType(types ...string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// The filesystem type follows the " - " separator.
		before, after, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(before), strings.Fields(after)
		if ok && len(fields) >= 5 && len(tail) > 0 && slices.Contains(types, tail[0]) {
			mounts = append(mounts, unescapeMount(fields[4]))
		}
	}
	return mounts, sc.Err()
}

// removeLogLinks removes the kubelet's links in /var/log/containers that
// point into logDir, the node's podLogsDir, and nothing else.
func removeLogLinks(logDir string) error {
	entries, err := os.ReadDir(ContainerLogLinks)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(ContainerLogLinks, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, logDir+"/") {
			errs = append(errs, os.Remove(p))
		}
	}
	return errors.Join(errs...)
}

// killShims kills what is left of the shims this node's containerd started
// (the processes whose executable is the node's shim binary), after their
// containers were deleted or containerd could not delete them.
func killShims(shim string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == shim {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
