package main

// A pod's network namespace: pods that really run get one each, as on a
// real node, so two replicas of a Deployment both listen on their
// container port. Inside it only loopback exists; the API server is
// reached at the same address as on the host (127.0.0.1:PORT) through a
// forwarder the kubelet keeps listening inside the namespace, the way a
// pod reaches the `kubernetes` Service. Nothing else of the host's
// network is reachable from a pod (a Git repository is read from the
// host's filesystem, which the pod shares). Probes dial into the
// namespace, as the kubelet dials a pod's IP.
//
// A goroutine enters a namespace by locking itself to its OS thread and
// calling setns(2) on that thread: sockets it creates there belong to the
// namespace for good, and a process it starts there is born in it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

type podNetwork struct {
	ns        *os.File
	forwarder net.Listener

	// mu is held for reading while a thread enters ns and for writing to
	// close it: a port-forward may dial in while the pod is deleted, and
	// a closed descriptor's number can be reused by another pod's
	// namespace.
	mu     sync.RWMutex
	closed bool
}

// newPodNetwork makes a network namespace with loopback up and the API
// server at apiHost:apiPort forwarded into it.
func newPodNetwork(apiHost, apiPort string) (*podNetwork, error) {
	var network *podNetwork
	err := onThread(nil, func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("creating a network namespace: %w", err)
		}
		ns, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			return err
		}
		if err := loopbackUp(); err != nil {
			ns.Close()
			return err
		}
		forwarder, err := net.Listen("tcp", net.JoinHostPort(apiHost, apiPort))
		if err != nil {
			ns.Close()
			return fmt.Errorf("forwarding the API server into the pod: %w", err)
		}
		network = &podNetwork{ns: ns, forwarder: forwarder}
		return nil
	})
	if err != nil {
		return nil, err
	}
	go network.forward(net.JoinHostPort(apiHost, apiPort))
	return network, nil
}

// onThread runs f on an OS thread of its own, inside ns (or, with ns nil,
// where f puts the thread), and puts the thread back in the host's
// network namespace after. A thread that cannot go back is never reused:
// it ends with its goroutine.
func onThread(ns *os.File, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		host, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer host.Close()
		if ns != nil {
			if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				done <- fmt.Errorf("entering a pod's network namespace: %w", err)
				return
			}
		}
		result := f()
		if unix.Setns(int(host.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- result
	}()
	return <-done
}

// loopbackUp brings up `lo` in the calling thread's network namespace.
func loopbackUp() error {
	socket, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(socket)
	request, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(socket, unix.SIOCGIFFLAGS, request); err != nil {
		return fmt.Errorf("reading lo's flags: %w", err)
	}
	request.SetUint16(request.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(socket, unix.SIOCSIFFLAGS, request); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	return nil
}

// forward copies each connection to the forwarder to target (on the
// host) and back, until the forwarder is closed.
func (n *podNetwork) forward(target string) {
	for {
		inside, err := n.forwarder.Accept()
		if err != nil {
			return
		}
		go func() {
			defer inside.Close()
			outside, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer outside.Close()
			go func() {
				_, _ = io.Copy(outside, inside)
				closeWrite(outside)
			}()
			_, _ = io.Copy(inside, outside)
		}()
	}
}

// enter runs f on a thread inside the namespace, unless it is closed.
func (n *podNetwork) enter(f func() error) error {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		return errors.New("the pod's network namespace is gone")
	}
	return onThread(n.ns, f)
}

// start starts cmd inside the namespace.
func (n *podNetwork) start(start func() error) error {
	return n.enter(start)
}

// dial connects to address inside the namespace.
func (n *podNetwork) dial(ctx context.Context, network, address string) (net.Conn, error) {
	var connection net.Conn
	err := n.enter(func() error {
		var dialer net.Dialer
		var err error
		connection, err = dialer.DialContext(ctx, network, address)
		return err
	})
	return connection, err
}

// close stops the forwarder and lets the namespace go once its processes
// have ended.
func (n *podNetwork) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	_ = n.forwarder.Close()
	_ = n.ns.Close()
}
