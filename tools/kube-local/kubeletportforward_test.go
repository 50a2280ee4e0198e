package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// runGreeter is the program of the greeter:test image: an HTTP server on
// ADDRESS answering every request with a greeting naming its path.
func runGreeter(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: greet ADDRESS")
	}
	return http.ListenAndServe(args[0], greeting("the pod"))
}

// greeting answers "hello from WHO: PATH".
func greeting(who string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s: %s", who, r.URL.Path)
	})
}

// startControlPlane runs etcd, kube-apiserver and the fake kubelet, whose
// exec kubelet runs greeter:test as this test binary, until the test
// ends; it returns the admin kubeconfig.
func startControlPlane(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running pods in namespaces of their own needs root")
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl is not on PATH")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plane := &controlPlane{dir: dir, pki: pki{dir: filepath.Join(dir, "pki")}}
	t.Cleanup(func() { plane.stop(stopGrace) })
	if err := plane.start(0, ""); err != nil {
		t.Fatal(err)
	}
	if err := plane.startFakeKubelet(execImages{"greeter:test": self}); err != nil {
		t.Fatal(err)
	}
	return plane.kubeconfig()
}

// kubectl runs kubectl against the control plane and returns its output.
func kubectl(t *testing.T, kubeconfig, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, output)
	}
	return string(output)
}

// greeterManifest is a pod running greeter:test on 127.0.0.1:PORT in its
// network namespace (Ready once it listens), a Service to it on port 80,
// and a pod whose image is not run (the fake kubelet reports it Running).
const greeterManifest = `
apiVersion: v1
kind: Namespace
metadata: {name: ns}
---
apiVersion: v1
kind: Pod
metadata: {name: greeter, namespace: ns, labels: {app: greeter}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: greeter
    image: greeter:test
    args: [greet, "127.0.0.1:PORT"]
    readinessProbe: {tcpSocket: {port: PORT}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: greeter, namespace: ns}
spec:
  selector: {app: greeter}
  ports: [{port: 80, targetPort: PORT}]
---
apiVersion: v1
kind: Pod
metadata: {name: idle, namespace: ns}
spec:
  automountServiceAccountToken: false
  containers: [{name: idle, image: "nginx:1.27"}]
`

var forwardingFrom = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> `)

// portForward runs `kubectl port-forward TARGET :PORT` until the test
// ends and returns the local address it forwards from. websockets false
// makes kubectl speak SPDY to the API server; by default it tunnels SPDY
// through a WebSocket, which the API server unwraps (the kubelet gets
// SPDY either way).
func portForward(t *testing.T, kubeconfig, target, port string, websockets bool) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", kubeconfig, "-n", "ns",
		"port-forward", "--address", "127.0.0.1", target, ":"+port)
	cmd.Env = append(os.Environ(), "KUBECTL_PORT_FORWARD_WEBSOCKETS="+strconv.FormatBool(websockets))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := func() string {
		cancel()
		_ = cmd.Wait()
		return stderr.String()
	}
	local := make(chan string, 1)
	go func() {
		defer close(local)
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if match := forwardingFrom.FindStringSubmatch(lines.Text()); match != nil {
				local <- "127.0.0.1:" + match[1]
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
		}
	}()
	select {
	case address, ok := <-local:
		if !ok {
			t.Fatalf("kubectl port-forward %s exited:\n%s", target, stopped())
		}
		t.Cleanup(func() { stopped() })
		return address
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward %s did not start forwarding:\n%s", target, stopped())
	}
	return ""
}

// get fetches path from address on a connection of its own.
func get(t *testing.T, address, path string) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	response, err := client.Get("http://" + address + path)
	if err != nil {
		t.Fatalf("GET %s through the forward: %v", path, err)
	}
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	if err != nil {
		t.Fatalf("GET %s through the forward: %v", path, err)
	}
	return string(body)
}

func TestKubectlPortForwardReachesAPortInsideThePod(t *testing.T) {
	kubeconfig := startControlPlane(t)
	// The host listens on the pod's port too: the greeter can bind it
	// only in a network of its own, and an answer from the host would
	// show the forward dialled the wrong network.
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go func() { _ = http.Serve(host, greeting("the host")) }()
	port := strconv.Itoa(host.Addr().(*net.TCPAddr).Port)

	kubectl(t, kubeconfig, strings.ReplaceAll(greeterManifest, "PORT", port), "apply", "-f", "-")
	kubectl(t, kubeconfig, "", "-n", "ns", "wait", "--for=condition=Ready", "pod/greeter", "--timeout=60s")

	for _, websockets := range []bool{true, false} {
		t.Run(fmt.Sprintf("pod, websockets %v", websockets), func(t *testing.T) {
			local := portForward(t, kubeconfig, "pod/greeter", port, websockets)
			// Two requests: each is a connection, and a stream, of its own.
			for _, path := range []string{"/one", "/two"} {
				if got, want := get(t, local, path), "hello from the pod: "+path; got != want {
					t.Errorf("GET %s through the forward answered %q, want %q", path, got, want)
				}
			}
		})
	}
	t.Run("service", func(t *testing.T) {
		// kubectl picks the Service's pod and its target port.
		local := portForward(t, kubeconfig, "svc/greeter", "80", true)
		if got, want := get(t, local, "/svc"), "hello from the pod: /svc"; got != want {
			t.Errorf("GET /svc through the Service's forward answered %q, want %q", got, want)
		}
	})
	t.Run("a pod not running here", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		output, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", kubeconfig, "-n", "ns",
			"port-forward", "--address", "127.0.0.1", "pod/idle", ":80").CombinedOutput()
		if err == nil || ctx.Err() != nil {
			t.Fatalf("kubectl port-forward to a pod nothing runs: err %v, want a prompt failure\n%s", err, output)
		}
		// The kubelet's 404 reaches the user through the API server.
		if !strings.Contains(string(output), "pod ns/idle is not running here") {
			t.Errorf("kubectl port-forward pod/idle said %q, want the kubelet's reason", output)
		}
	})
}

func TestPortForwardToAPodNotRunHereIs404NamingIt(t *testing.T) {
	k := &execKubelet{pods: map[types.UID]*execPod{}}
	for _, path := range []string{"/portForward/ns/missing", "/portForward/ns/missing/uid-1"} {
		response := httptest.NewRecorder()
		k.kubeletAPI().ServeHTTP(response, httptest.NewRequest(http.MethodPost, path, nil))
		if response.Code != http.StatusNotFound || !strings.Contains(response.Body.String(), "pod ns/missing ") {
			t.Errorf("%s: %d %q, want 404 naming pod ns/missing", path, response.Code, response.Body.String())
		}
	}
}

// halfDuplex is a client stream that has sent everything already. Its
// fields are named, not embedded: io.Copy would take a promoted
// Buffer.WriteTo for reading.
type halfDuplex struct {
	sent     io.Reader
	received bytes.Buffer
}

func (h *halfDuplex) Read(p []byte) (int, error)  { return h.sent.Read(p) }
func (h *halfDuplex) Write(p []byte) (int, error) { return h.received.Write(p) }

func TestSpliceLetsThePodAnswerAfterTheClientHasSentEverything(t *testing.T) {
	// A pod that answers once it has read its request to the end.
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	go func() {
		connection, err := listener.Accept()
		if err != nil {
			return
		}
		defer connection.Close()
		request, _ := io.ReadAll(connection)
		fmt.Fprintf(connection, "got %q", request)
	}()
	pod, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer pod.Close()
	client := &halfDuplex{sent: strings.NewReader("request")}
	started := time.Now()
	splice(pod, client)
	if got, want := client.received.String(), `got "request"`; got != want {
		t.Errorf("the client received %q, want %q", got, want)
	}
	if elapsed := time.Since(started); elapsed >= halfCloseGrace {
		t.Errorf("splice waited %s, the whole grace, for a pod that had closed", elapsed)
	}
}
