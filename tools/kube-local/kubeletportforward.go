package main

// Port forwarding (`kubectl port-forward`): the API server proxies a pod's
// portforward subresource to the node's kubelet at
// /portForward/NAMESPACE/POD and upgrades the connection to SPDY (a
// WebSocket client is tunnelled to SPDY by the API server). The upstream
// streaming code speaks that protocol and hands over one stream per
// forwarded connection; this kubelet connects each stream to the port on
// 127.0.0.1 inside the pod's network namespace, as a kubelet reaches a
// pod's port through its sandbox.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubelet/pkg/cri/streaming/portforward"
)

const (
	// portForwardIdleTimeout closes a port-forward that carried nothing
	// for that long: the kubelet's default (streamingConnectionIdleTimeout).
	portForwardIdleTimeout = 4 * time.Hour
	// portForwardStreamCreationTimeout drops a forwarded connection whose
	// data and error streams do not both arrive within it (upstream's
	// default).
	portForwardStreamCreationTimeout = 30 * time.Second
	// portForwardDialTimeout bounds connecting to the pod's port. Loopback
	// answers at once, unless the listener's queue is full.
	portForwardDialTimeout = 10 * time.Second
	// halfCloseGrace is how long the pod may go on answering once the
	// client has sent everything. The stream gives no other sign that the
	// client went away, and a pod that never closes its end would hold
	// the connection for good.
	halfCloseGrace = 5 * time.Second
)

// portForward serves /portForward/NAMESPACE/POD[/UID] for the pods this
// kubelet runs; any other pod is 404, as the kubelet answers for a pod it
// does not have.
func (k *execKubelet) portForward(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("pod")
	p, ok := k.podNamed(namespace, name)
	if !ok || (r.PathValue("uid") != "" && types.UID(r.PathValue("uid")) != p.pod.UID) {
		http.Error(w, "pod "+namespace+"/"+name+" is not running here", http.StatusNotFound)
		return
	}
	options, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, "pod "+namespace+"/"+name+": "+err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, r, k, namespace+"/"+name, p.pod.UID, options,
		portForwardIdleTimeout, portForwardStreamCreationTimeout, portforward.SupportedProtocols)
}

// PortForward is portforward.PortForwarder: it connects stream to port on
// 127.0.0.1 in pod uid's network (name is "namespace/name") and copies
// between them until the pod's side is done. The upstream caller writes
// an error back to the client on the stream pair's error stream.
func (k *execKubelet) PortForward(ctx context.Context, name string, uid types.UID, port int32, stream io.ReadWriteCloser) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("pod %s: %d is not a TCP port", name, port)
	}
	p, ok := k.podWithUID(uid)
	if !ok {
		return fmt.Errorf("pod %s: not running here any more", name)
	}
	dialCtx, cancel := context.WithTimeout(ctx, portForwardDialTimeout)
	defer cancel()
	connection, err := p.dialer()(dialCtx, "tcp", net.JoinHostPort(execPodIP, strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("pod %s: connecting to port %d: %w", name, port, err)
	}
	defer connection.Close()
	splice(connection, stream)
	return nil
}

// splice copies between the pod's connection and the client's stream
// until the pod's side ends. Once the client has sent everything the pod
// is told so (a half-close, as a TCP client would) and has halfCloseGrace
// to finish its answer. The caller closes both afterwards, which ends the
// copy still running.
func splice(pod net.Conn, client io.ReadWriter) {
	clientDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(pod, client)
		closeWrite(pod)
		close(clientDone)
	}()
	podDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(client, pod)
		close(podDone)
	}()
	select {
	case <-podDone:
	case <-clientDone:
		select {
		case <-podDone:
		case <-time.After(halfCloseGrace):
		}
	}
}

// closeWrite half-closes a TCP connection: the peer reads EOF and may
// still answer.
func closeWrite(connection net.Conn) {
	if tcp, ok := connection.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	}
}
