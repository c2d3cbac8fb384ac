// Package sysmem reads how much memory this process may use: the limit of
// its container (cgroup v2 or v1) when it has one below the machine's
// memory, else the machine's memory.
package sysmem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Limit returns the bytes of memory a process of fsys (the root file
// system, os.DirFS("/") for this one) may use and where that figure comes
// from: the lowest memory limit of its cgroup and the cgroup's ancestors
// (cgroup v2 memory.max, v1 memory.limit_in_bytes) when it is below the
// machine's memory, else the machine's MemTotal (/proc/meminfo).
func Limit(fsys fs.FS) (bytes int64, from string, err error) {
	total, err := memTotal(fsys)
	if err != nil {
		return 0, "", err
	}
	bytes, from = total, "the machine's memory"
	if cg, cgFrom, ok := cgroupLimit(fsys); ok && cg < total {
		bytes, from = cg, cgFrom
	}
	return bytes, from, nil
}

// memTotal reads MemTotal from /proc/meminfo.
func memTotal(fsys fs.FS) (int64, error) {
	data, err := fs.ReadFile(fsys, "proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("sysmem: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || kb <= 0 {
				return 0, fmt.Errorf("sysmem: /proc/meminfo: MemTotal %q", f[1])
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("sysmem: /proc/meminfo has no MemTotal")
}

// cgroupLimit is the lowest memory limit on the way from the process's
// cgroup (/proc/self/cgroup) up to the root, in the v2 hierarchy or in the
// v1 memory controller's; ok is false when there is none.
func cgroupLimit(fsys fs.FS) (limit int64, from string, ok bool) {
	data, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, "", false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, file, name string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, file, name = "sys/fs/cgroup", "memory.max", "the container's memory limit (cgroup v2)"
		case hasController(parts[1], "memory"):
			dir, file, name = "sys/fs/cgroup/memory", "memory.limit_in_bytes", "the container's memory limit (cgroup v1)"
		default:
			continue
		}
		for p := path.Clean("/" + parts[2]); ; p = path.Dir(p) {
			if v, found := readLimit(fsys, path.Join(dir, p, file)); found && (!ok || v < limit) {
				limit, from, ok = v, name, true
			}
			if p == "/" {
				break
			}
		}
	}
	return limit, from, ok
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads a limit file: a byte count, or "max" (none).
func readLimit(fsys fs.FS, name string) (int64, bool) {
	data, err := fs.ReadFile(fsys, strings.TrimPrefix(name, "/"))
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(data))
	v, err := strconv.ParseInt(s, 10, 64)
	if s == "max" || err != nil || v <= 0 {
		return 0, false
	}
	return v, true
}
