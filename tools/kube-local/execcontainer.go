package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
)

// runExecContainer is the first moment of a container that really runs:
// started by the exec kubelet in a mount namespace of its own, it
// bind-mounts the pod's directories (service account, emptyDir volumes) at
// their paths, then replaces itself with the container's program, which
// keeps its process id. Go cannot run code between fork and exec, hence
// this step as a process.
//
// A mount target that does not exist on the host is created there as an
// empty directory (mkdir is not confined to a mount namespace); the
// mounts themselves are seen only by the container.
func runExecContainer(args []string) error {
	flags := flag.NewFlagSet("exec-container", flag.ContinueOnError)
	var mounts stringList
	flags.Var(&mounts, "bind", "SOURCE=TARGET to bind-mount (repeatable)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	argv := flags.Args()
	if len(argv) == 0 {
		return errors.New("no program to run")
	}
	// The program is opened before anything is mounted, so that a volume
	// mounted over its folder (an emptyDir at /tmp, where a clone's build
	// may live) does not hide it from the container.
	program, err := os.Open(argv[0])
	if err != nil {
		return fmt.Errorf("opening the program: %w", err)
	}
	// Nothing mounted here may reach the host's namespace.
	if err := syscall.Mount("none", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	for _, mount := range mounts {
		source, target, ok := strings.Cut(mount, "=")
		if !ok {
			return fmt.Errorf("--bind %q is not SOURCE=TARGET", mount)
		}
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("creating mount point %s: %w", target, err)
		}
		if err := syscall.Mount(source, target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mounting %s at %s: %w", source, target, err)
		}
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	err = syscall.Exec(executable(program, argv[0]), argv, os.Environ())
	runtime.KeepAlive(program)
	return err
}

// executable is the path to exec the program opened as program from path:
// path itself while it still names that file, else the open file (through
// /proc/self/fd; the program still sees path as its name). The former also
// suits scripts, whose interpreter reopens the path.
func executable(program *os.File, path string) string {
	opened, err := program.Stat()
	if err != nil {
		return path
	}
	if now, err := os.Stat(path); err == nil && os.SameFile(opened, now) {
		return path
	}
	return fmt.Sprintf("/proc/self/fd/%d", program.Fd())
}
