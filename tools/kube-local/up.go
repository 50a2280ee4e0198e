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
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"
)

const readyTimeout = 120 * time.Second

// runUp starts the control plane and supervises it until told to stop.
func runUp(args []string) error {
	flags := flag.NewFlagSet("up", flag.ContinueOnError)
	dir := flags.String("dir", "", "state directory (pki, kubeconfig, logs)")
	withControllerManager := flags.Bool("controller-manager", false, "also run kube-controller-manager")
	withFakeKubelet := flags.Bool("fake-kubelet", false, "also run a fake kubelet with one Ready node")
	port := flags.Int("port", 0, "kube-apiserver port on 127.0.0.1 (0: pick a free one)")
	auditLog := flags.String("audit-log", "", "write an API audit log (Metadata level) to this file")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	absDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	started := time.Now()
	plane := &controlPlane{dir: absDir, pki: pki{dir: filepath.Join(absDir, "pki")}}
	defer plane.stop()

	stop := stopSignals()
	if err := plane.start(*port, *auditLog); err != nil {
		return err
	}
	if *withControllerManager {
		if err := plane.startControllerManager(); err != nil {
			return err
		}
	}
	if *withFakeKubelet {
		if err := plane.startFakeKubelet(); err != nil {
			return err
		}
	}
	fmt.Printf("READY %s\n", plane.kubeconfig())
	fmt.Fprintf(os.Stderr, "kube-local: ready in %.1fs\n", time.Since(started).Seconds())

	select {
	case reason := <-stop:
		fmt.Fprintf(os.Stderr, "kube-local: stopping (%s)\n", reason)
		return nil
	case exited := <-plane.exited:
		return fmt.Errorf("%s exited unexpectedly; see %s", exited, plane.logPath(exited))
	}
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
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *controlPlane) kubeconfig() string         { return filepath.Join(p.dir, "kubeconfig") }
func (p *controlPlane) logPath(name string) string { return filepath.Join(p.dir, "logs", name+".log") }

func (p *controlPlane) start(apiPort int, auditLog string) error {
	p.exited = make(chan string, 8)
	if err := os.MkdirAll(filepath.Join(p.dir, "logs"), 0o755); err != nil {
		return err
	}
	_ = os.Remove(p.kubeconfig())
	if err := p.pki.generate(); err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
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
		policy := filepath.Join(p.dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return err
		}
		apiArgs = append(apiArgs, "--audit-policy-file", policy, "--audit-log-path", auditLog,
			"--audit-log-format", "json", "--audit-log-mode", "batch")
	}
	if err := p.spawn("apiserver", apiArgs...); err != nil {
		return err
	}
	if err := p.waitReady(); err != nil {
		return err
	}
	return writeKubeconfig(p.kubeconfig(), p.server, p.pki.caCert(), p.pki.adminCert(), p.pki.adminKey(), "kube-local-admin")
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

func (p *controlPlane) startFakeKubelet() error {
	return p.spawn("fake-kubelet", "--kubeconfig", p.kubeconfig())
}

// spawn starts this binary as a child running one component. The kernel
// kills the child if this process dies (Pdeathsig), so nothing is left
// behind even after a SIGKILL of the supervisor.
func (p *controlPlane) spawn(name string, args ...string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logFile, err := os.Create(p.logPath(name))
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(c.done)
		p.exited <- name
	}()
	p.mu.Lock()
	p.children = append(p.children, c)
	p.mu.Unlock()
	return nil
}

// stop ends the children in reverse start order: SIGTERM, then SIGKILL
// after a grace period; then removes etcd's tmpfs data.
func (p *controlPlane) stop() {
	p.mu.Lock()
	children := append([]*child(nil), p.children...)
	p.mu.Unlock()
	for i := len(children) - 1; i >= 0; i-- {
		c := children[i]
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	if p.etcdDir != "" {
		_ = os.RemoveAll(p.etcdDir)
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
			return fmt.Errorf("%s exited before the API server was ready; see %s", name, p.logPath(name))
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
