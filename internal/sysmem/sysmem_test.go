package sysmem

import (
	"testing"
	"testing/fstest"
)

func TestLimit(t *testing.T) {
	meminfo := &fstest.MapFile{Data: []byte("MemTotal:       24683520 kB\nMemFree:        1000 kB\n")}
	const total = 24683520 << 10
	tests := []struct {
		name  string
		files fstest.MapFS
		want  int64
		from  string
	}{
		{"no cgroup", fstest.MapFS{"proc/meminfo": meminfo}, total, "the machine's memory"},
		{"v2 without a limit", fstest.MapFS{"proc/meminfo": meminfo,
			"proc/self/cgroup":         {Data: []byte("0::/\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("max\n")}}, total, "the machine's memory"},
		{"v2 container", fstest.MapFS{"proc/meminfo": meminfo,
			"proc/self/cgroup":         {Data: []byte("0::/\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("2147483648\n")}}, 2 << 30, "the container's memory limit (cgroup v2)"},
		{"v2 nested, the parent's limit lower", fstest.MapFS{"proc/meminfo": meminfo,
			"proc/self/cgroup":                       {Data: []byte("0::/kubepods/pod1\n")},
			"sys/fs/cgroup/kubepods/pod1/memory.max": {Data: []byte("max\n")},
			"sys/fs/cgroup/kubepods/memory.max":      {Data: []byte("1073741824\n")}}, 1 << 30, "the container's memory limit (cgroup v2)"},
		{"v1 container", fstest.MapFS{"proc/meminfo": meminfo,
			"proc/self/cgroup": {Data: []byte("12:cpu,cpuacct:/\n11:memory:/docker/abc\n")},
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": {Data: []byte("536870912\n")}}, 512 << 20, "the container's memory limit (cgroup v1)"},
		{"v1 unlimited", fstest.MapFS{"proc/meminfo": meminfo,
			"proc/self/cgroup":                           {Data: []byte("11:memory:/\n")},
			"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712\n")}}, total, "the machine's memory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, from, err := Limit(tc.files)
			if err != nil || got != tc.want || from != tc.from {
				t.Errorf("Limit = %d, %q, %v; want %d, %q", got, from, err, tc.want, tc.from)
			}
		})
	}
	if _, _, err := Limit(fstest.MapFS{}); err == nil {
		t.Error("no /proc/meminfo: no error")
	}
}
