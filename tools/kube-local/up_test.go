package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 {
		t.Fatalf("got %d ports", len(ports))
	}
	seen := map[int]bool{}
	for _, port := range ports {
		if port <= 0 || port > 65535 || seen[port] {
			t.Errorf("bad or repeated port %d in %v", port, ports)
		}
		seen[port] = true
	}
}

func TestIsBindConflict(t *testing.T) {
	for log, want := range map[string]bool{
		// embedded etcd, as runEtcd reports it
		"kube-local etcd: listen tcp 127.0.0.1:40123: bind: address already in use\n": true,
		// kube-apiserver
		"E1203 run.go:72] \"command failed\" err=\"failed to create listener: failed to listen on 127.0.0.1:40125: listen tcp 127.0.0.1:40125: bind: address already in use\"\n": true,
		"kube-local etcd: open /dev/shm/x: permission denied\n": false,
		"": false,
	} {
		if got := isBindConflict(log); got != want {
			t.Errorf("isBindConflict(%q) = %v, want %v", log, got, want)
		}
	}
}

func TestChildExitedErrorIsFoundWhenWrapped(t *testing.T) {
	err := fmt.Errorf("starting: %w", &childExitedError{name: "etcd", log: "/d/logs/etcd.log"})
	var exited *childExitedError
	if !errors.As(err, &exited) || exited.name != "etcd" {
		t.Fatalf("errors.As failed on %v", err)
	}
	want := "starting: etcd exited before the API server was ready; see /d/logs/etcd.log"
	if err.Error() != want {
		t.Errorf("got %q, want %q", err.Error(), want)
	}
}

func TestLostPortRace(t *testing.T) {
	dir := t.TempDir()
	p := &controlPlane{dir: dir}
	write := func(name, log string) {
		t.Helper()
		if err := writeFileAtomic(p.logPath(name), []byte(log), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	inUse := "listen tcp 127.0.0.1:1: bind: address already in use\n"
	write("etcd", inUse)
	write("apiserver", inUse)
	write("fake-kubelet", inUse)
	cases := []struct {
		name         string
		apiPortFixed bool
		want         bool
	}{
		{"etcd", false, true},
		{"etcd", true, true},
		{"apiserver", false, true},
		{"apiserver", true, false}, // --port was given: not a race
		{"fake-kubelet", false, false},
		{"controller-manager", false, false}, // no log at all
	}
	for _, c := range cases {
		if got := p.lostPortRace(c.name, c.apiPortFixed); got != c.want {
			t.Errorf("lostPortRace(%s, fixed=%v) = %v, want %v", c.name, c.apiPortFixed, got, c.want)
		}
	}
	write("etcd", "some other failure\n")
	if p.lostPortRace("etcd", false) {
		t.Error("a failure other than a bind conflict counted as a port race")
	}
}

func TestAnOutageFileKeepsAComponentDownThatLongOnceAndIsThenRemoved(t *testing.T) {
	dir := t.TempDir()
	plane := &controlPlane{dir: dir}
	path := filepath.Join(dir, "down-apiserver")
	if err := os.WriteFile(path, []byte("300ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	plane.stayDown("apiserver")
	if waited := time.Since(began); waited < 300*time.Millisecond {
		t.Errorf("stayed down %s, want 300ms", waited)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the outage file is still there: %v", err)
	}
	began = time.Now()
	plane.stayDown("apiserver")
	if waited := time.Since(began); waited > 100*time.Millisecond {
		t.Errorf("no file, yet stayed down %s", waited)
	}
}
