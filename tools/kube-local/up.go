package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/term"
)

const readyTimeout = 120 * time.Second

// upOptions are the flags of `kube-local up`.
type upOptions struct {
	dir               string
	controllerManager bool
	fakeKubelet       bool
	port              int
	auditLog          string
	execImages        execImages
}

// upFlags defines the flags of `kube-local up` (the usage text in main.go
// must list each of them; a test checks it).
func upFlags() (*flag.FlagSet, *upOptions) {
	o := &upOptions{}
	flags := flag.NewFlagSet("up", flag.ContinueOnError)
	flags.StringVar(&o.dir, "dir", "", "state directory (pki, kubeconfig, logs)")
	flags.BoolVar(&o.controllerManager, "controller-manager", false, "also run kube-controller-manager")
	flags.BoolVar(&o.fakeKubelet, "fake-kubelet", false, "also run a fake kubelet with one Ready node")
	flags.Var(&o.execImages, "exec-image", "IMAGE=PATH: really run the pods of IMAGE as the host program PATH (repeatable)")
	flags.IntVar(&o.port, "port", 0, "kube-apiserver port on 127.0.0.1 (0: pick a free one)")
	flags.StringVar(&o.auditLog, "audit-log", "", "write an API audit log (Metadata level) to this file")
	return flags, o
}

// runUp starts the control plane and supervises it until told to stop.
func runUp(args []string) error {
	flags, o := upFlags()
	if err := flags.Parse(args); err != nil {
		return err
	}
	if o.dir == "" {
		return errors.New("--dir is required")
	}
	if o.port < 0 || o.port > 65535 {
		return fmt.Errorf("--port %d is not a TCP port", o.port)
	}
	if err := checkExecImages(o.execImages, o.fakeKubelet); err != nil {
		return err
	}
	absDir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	started := time.Now()
	plane := &controlPlane{dir: absDir, pki: pki{dir: filepath.Join(absDir, "pki")}}
	defer plane.stop(stopGrace)

	stop := stopSignals()
	if err := plane.start(o.port, o.auditLog); err != nil {
		return err
	}
	if o.controllerManager {
		if err := plane.startControllerManager(); err != nil {
			return err
		}
	}
	if o.fakeKubelet {
		if err := plane.startFakeKubelet(o.execImages); err != nil {
			return err
		}
	}
	fmt.Printf("READY %s\n", plane.kubeconfig())
	fmt.Fprintf(os.Stderr, "kube-local: ready in %.1fs\n", time.Since(started).Seconds())

	restarts := make(chan os.Signal, 4)
	signal.Notify(restarts, syscall.SIGUSR1, syscall.SIGUSR2)
	for {
		select {
		case reason := <-stop:
			fmt.Fprintf(os.Stderr, "kube-local: stopping (%s)\n", reason)
			return nil
		case exited := <-plane.exited:
			return fmt.Errorf("%s exited unexpectedly; see %s", exited, plane.logPath(exited))
		case signal := <-restarts:
			name := restartedBy(signal)
			began := time.Now()
			if err := plane.restart(name); err != nil {
				return fmt.Errorf("restarting %s: %w", name, err)
			}
			fmt.Fprintf(os.Stderr, "kube-local: restarted %s in %.1fs\n", name, time.Since(began).Seconds())
			if err := plane.recordRestart(name); err != nil {
				return err
			}
		}
	}
}

// restartedBy is the component a restart signal names: SIGUSR2 etcd,
// SIGUSR1 (or anything else) the API server.
func restartedBy(signal os.Signal) string {
	if signal == syscall.SIGUSR2 {
		return "etcd"
	}
	return "apiserver"
}

// stopSignals reports SIGTERM, SIGINT and, when stdin is a pipe or terminal,
// its EOF: a parent that dies closes the pipe, and the control plane goes
// with it. Stdin from /dev/null is not watched, or it would stop at once.
func stopSignals() <-chan string {
	stop := make(chan string, 2)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() { stop <- (<-signals).String() }()
	if stdinIsPipeOrTerminal() {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop <- "stdin closed"
		}()
	}
	return stop
}

func stdinIsPipeOrTerminal() bool {
	info, err := os.Stdin.Stat()
	if err != nil {
		return false
	}
	return info.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0 || term.IsTerminal(int(os.Stdin.Fd()))
}

type controlPlane struct {
	dir     string
	pki     pki
	server  string
	etcdDir string

	mu       sync.Mutex
	children []*child
	exited   chan string
}

type child struct {
	name string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
	// Set before a restart stops it: its exit is expected.
	restarting atomic.Bool
}

func (p *controlPlane) kubeconfig() string         { return filepath.Join(p.dir, "kubeconfig") }
func (p *controlPlane) logPath(name string) string { return filepath.Join(p.dir, "logs", name+".log") }
func (p *controlPlane) auditPolicy() string        { return filepath.Join(p.dir, "audit-policy.yaml") }

// startAttempts bounds the retries of a start that lost a port race.
const startAttempts = 3

// start runs etcd and kube-apiserver and waits until the API server is
// ready. The ports are picked by freePorts, which must close its listeners
// before the children bind them: the children are separate processes, and
// neither embedded etcd nor kube-apiserver's command line accepts an
// inherited listener. Another process may take a port in that gap; when a
// child then exits with "address already in use", the attempt is torn down
// and the start retried with fresh ports (up to startAttempts in all). A
// conflict on a port given with --port is not retried.
func (p *controlPlane) start(apiPort int, auditLog string) error {
	if err := os.MkdirAll(filepath.Join(p.dir, "logs"), 0o755); err != nil {
		return err
	}
	_ = os.Remove(p.kubeconfig())
	if err := p.pki.generate(); err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
	if auditLog != "" {
		if err := os.WriteFile(p.auditPolicy(), []byte(auditPolicy), 0o644); err != nil {
			return err
		}
	}
	for attempt := 1; ; attempt++ {
		err := p.startOnce(apiPort, auditLog)
		if err == nil {
			return writeKubeconfig(p.kubeconfig(), p.server, p.pki.caCert(), p.pki.adminCert(), p.pki.adminKey(), "kube-local-admin")
		}
		// Nothing of a failed attempt is worth a graceful shutdown.
		p.stop(0)
		var exited *childExitedError
		if !errors.As(err, &exited) || !p.lostPortRace(exited.name, apiPort != 0) {
			return err
		}
		if attempt == startAttempts {
			return fmt.Errorf("%w (a port was taken by another process on each of %d attempts)", err, attempt)
		}
		fmt.Fprintf(os.Stderr, "kube-local: %s could not bind its port (taken after it was picked); retrying with fresh ports\n", exited.name)
	}
}

// lostPortRace reports whether the child name exited because a port picked
// for it was taken meanwhile. apiPortFixed: the API server's port came from
// --port, so a conflict there is the caller's to fix, not a race.
func (p *controlPlane) lostPortRace(name string, apiPortFixed bool) bool {
	if name != "etcd" && (name != "apiserver" || apiPortFixed) {
		return false
	}
	log, err := os.ReadFile(p.logPath(name))
	return err == nil && isBindConflict(string(log))
}

// isBindConflict reports whether a component's log shows it failed to
// listen on a port another process holds.
func isBindConflict(log string) bool {
	return strings.Contains(log, "address already in use")
}

// childExitedError is a child that exited while the control plane started.
type childExitedError struct {
	name, log string
}

func (e *childExitedError) Error() string {
	return fmt.Sprintf("%s exited before the API server was ready; see %s", e.name, e.log)
}

// startOnce is one attempt of start: fresh ports, a fresh etcd data
// directory, etcd and kube-apiserver, and a wait for /readyz.
func (p *controlPlane) startOnce(apiPort int, auditLog string) error {
	p.exited = make(chan string, 8)
	etcdDir, err := os.MkdirTemp(tmpfsRoot(), "kube-local-etcd-")
	if err != nil {
		return err
	}
	p.etcdDir = etcdDir

	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	if apiPort == 0 {
		apiPort = ports[2]
	}
	etcdClient, etcdPeer := ports[0], ports[1]
	if err := p.spawn("etcd", "--data-dir", etcdDir,
		"--client-port", strconv.Itoa(etcdClient), "--peer-port", strconv.Itoa(etcdPeer)); err != nil {
		return err
	}

	p.server = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	apiArgs := []string{
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdClient),
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(apiPort),
		"--tls-cert-file", p.pki.servingCert(),
		"--tls-private-key-file", p.pki.servingKey(),
		"--client-ca-file", p.pki.caCert(),
		"--service-account-key-file", p.pki.serviceAccountPub(),
		"--service-account-signing-key-file", p.pki.serviceAccountKey(),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--api-audiences", "https://kubernetes.default.svc.cluster.local",
		"--authorization-mode", "RBAC",
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--allow-privileged=true",
		// Pods are admitted without a "default" ServiceAccount having been
		// created first, so a test can create a namespace and a pod at once.
		"--disable-admission-plugins", "ServiceAccount",
		// No endpoint reconciler: it would write every 10s, and tests count
		// API requests in a steady state.
		"--endpoint-reconciler-type", "none",
		"--profiling=false",
		"--v", "0",
	}
	if auditLog != "" {
		apiArgs = append(apiArgs, "--audit-policy-file", p.auditPolicy(), "--audit-log-path", auditLog,
			"--audit-log-format", "json", "--audit-log-mode", "batch")
	}
	if err := p.spawn("apiserver", apiArgs...); err != nil {
		return err
	}
	return p.waitReady()
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

func (p *controlPlane) startControllerManager() error {
	return p.spawn("controller-manager",
		"--kubeconfig", p.kubeconfig(),
		"--leader-elect=false",
		"--secure-port", "0",
		"--service-account-private-key-file", p.pki.serviceAccountKey(),
		"--root-ca-file", p.pki.caCert(),
		"--use-service-account-credentials=false",
		// The fake kubelet sends no heartbeats, so node lifecycle would mark
		// its node NotReady and evict everything; there is no cloud either.
		"--controllers", "*,-nodelifecycle,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
		"--v", "0",
	)
}

func (p *controlPlane) startFakeKubelet(images execImages) error {
	args := []string{"--kubeconfig", p.kubeconfig()}
	if len(images) > 0 {
		args = append(args, "--pods-dir", filepath.Join(p.dir, "pods"))
		for image, path := range images {
			args = append(args, "--exec-image", image+"="+path)
		}
	}
	return p.spawn("fake-kubelet", args...)
}

// checkExecImages refuses --exec-image without the kubelet that would run
// them, or with a program that is not an absolute path to an executable
// (the container starts in /).
func checkExecImages(images execImages, fakeKubelet bool) error {
	if len(images) > 0 && !fakeKubelet {
		return errors.New("--exec-image needs --fake-kubelet")
	}
	for image, path := range images {
		if !filepath.IsAbs(path) {
			return fmt.Errorf("--exec-image %s=%s: the program must be an absolute path", image, path)
		}
		info, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("--exec-image %s=%s: %w", image, path, err)
		}
		if info.IsDir() || info.Mode()&0o111 == 0 {
			return fmt.Errorf("--exec-image %s=%s: not an executable file", image, path)
		}
	}
	return nil
}

// spawn starts this binary as a child running one component. The kernel
// kills the child if this process dies (Pdeathsig), so nothing is left
// behind even after a SIGKILL of the supervisor.
func (p *controlPlane) spawn(name string, args ...string) error {
	c, err := p.launch(name, os.O_TRUNC, args...)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.children = append(p.children, c)
	p.mu.Unlock()
	return nil
}

// restart stops the child name (SIGTERM, then SIGKILL after stopGrace) and
// starts it again with the same arguments in its place, then waits until
// the API server is ready. etcd keeps its data directory and the API
// server its port, so clients find the same cluster again, as after a real
// restart.
func (p *controlPlane) restart(name string) error {
	p.mu.Lock()
	index := -1
	for i, c := range p.children {
		if c.name == name {
			index = i
		}
	}
	if index < 0 {
		p.mu.Unlock()
		return fmt.Errorf("no %s is running", name)
	}
	old := p.children[index]
	p.mu.Unlock()
	old.restarting.Store(true)
	old.terminate(stopGrace)
	p.stayDown(name)
	c, err := p.launch(name, os.O_APPEND, old.args...)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.children[index] = c
	p.mu.Unlock()
	return p.waitReady()
}

// stayDown keeps a stopped child down for as long as DIR/down-NAME says
// (a Go duration, e.g. "20s"), then removes that file: an outage of that
// length rather than a quick restart. A missing or malformed file means
// no wait.
func (p *controlPlane) stayDown(name string) {
	path := filepath.Join(p.dir, "down-"+name)
	text, err := os.ReadFile(path)
	if err != nil {
		return
	}
	_ = os.Remove(path)
	down, err := time.ParseDuration(strings.TrimSpace(string(text)))
	if err != nil || down <= 0 {
		fmt.Fprintf(os.Stderr, "kube-local: ignoring %s: %q is not a duration\n", path, text)
		return
	}
	fmt.Fprintf(os.Stderr, "kube-local: %s stays down for %s\n", name, down)
	time.Sleep(down)
}

// recordRestart appends name to DIR/restarts, for whoever asked for it.
func (p *controlPlane) recordRestart(name string) error {
	file, err := os.OpenFile(filepath.Join(p.dir, "restarts"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(file, name)
	if closeErr := file.Close(); err == nil {
		err = closeErr
	}
	return err
}

// launch starts one child (see spawn); its output goes to DIR/logs/NAME.log,
// opened with logMode (os.O_TRUNC for a first start, os.O_APPEND across
// restarts).
func (p *controlPlane) launch(name string, logMode int, args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(p.logPath(name), logMode|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, args: args, cmd: cmd, done: make(chan struct{})}
	// The channel of this attempt: a child stopped by a retry must not
	// report its exit to the next one.
	exited := p.exited
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(c.done)
		if !c.restarting.Load() {
			exited <- name
		}
	}()
	return c, nil
}

// terminate ends the child: SIGTERM, then SIGKILL after grace (at once
// when grace is 0); returns once it has exited.
func (c *child) terminate(grace time.Duration) {
	if grace == 0 {
		_ = c.cmd.Process.Kill()
		<-c.done
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// stopGrace is how long a child has to exit after SIGTERM.
const stopGrace = 10 * time.Second

// stop ends the children in reverse start order: SIGTERM, then SIGKILL
// after grace (at once when grace is 0); then removes etcd's tmpfs data. It
// may be called again (a retried start, then the supervisor's exit).
func (p *controlPlane) stop(grace time.Duration) {
	p.mu.Lock()
	children := p.children
	p.children = nil
	p.mu.Unlock()
	for i := len(children) - 1; i >= 0; i-- {
		c := children[i]
		c.terminate(grace)
	}
	if p.etcdDir != "" {
		_ = os.RemoveAll(p.etcdDir)
		p.etcdDir = ""
	}
}

func (p *controlPlane) waitReady() error {
	ca, err := os.ReadFile(p.pki.caCert())
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(p.pki.adminCert(), p.pki.adminKey())
	if err != nil {
		return err
	}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	for {
		select {
		case name := <-p.exited:
			return &childExitedError{name: name, log: p.logPath(name)}
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready after %s; see %s", readyTimeout, p.logPath("apiserver"))
		case <-time.After(200 * time.Millisecond):
		}
		response, err := client.Get(p.server + "/readyz")
		if err != nil {
			continue
		}
		_ = response.Body.Close()
		if response.StatusCode == http.StatusOK {
			return nil
		}
	}
}

// tmpfsRoot is /dev/shm when it exists, so etcd never touches a disk.
func tmpfsRoot() string {
	if info, err := os.Stat("/dev/shm"); err == nil && info.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// freePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago. It holds every listener until all n are picked, so the ports differ,
// then closes them: the caller's children bind them afterwards, and start
// retries if another process took one in between.
func freePorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
