package main

import (
	"bufio"
	"context"
	"net"
	"testing"
)

// serveName answers each connection on listener with name.
func serveName(listener net.Listener, name string) {
	for {
		connection, err := listener.Accept()
		if err != nil {
			return
		}
		_, _ = connection.Write([]byte(name + "\n"))
		_ = connection.Close()
	}
}

func readName(t *testing.T, connection net.Conn, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer connection.Close()
	line, err := bufio.NewReader(connection).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line[:len(line)-1]
}

func TestTwoPodsListenOnOnePortAndBothReachTheAPIServer(t *testing.T) {
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go serveName(host, "api")
	_, port, _ := net.SplitHostPort(host.Addr().String())

	var pods []*podNetwork
	for _, name := range []string{"a", "b"} {
		pod, err := newPodNetwork("127.0.0.1", port)
		if err != nil {
			t.Fatal(err)
		}
		defer pod.close()
		// The container's port, the same in both pods.
		err = onThread(pod.ns, func() error {
			listener, err := net.Listen("tcp", "127.0.0.1:18080")
			if err == nil {
				go serveName(listener, name)
			}
			return err
		})
		if err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		pods = append(pods, pod)
	}
	ctx := context.Background()
	for i, want := range []string{"a", "b"} {
		connection, err := pods[i].dial(ctx, "tcp", "127.0.0.1:18080")
		if got := readName(t, connection, err); got != want {
			t.Errorf("pod %s's port answered %q", want, got)
		}
		connection, err = pods[i].dial(ctx, "tcp", host.Addr().String())
		if got := readName(t, connection, err); got != "api" {
			t.Errorf("pod %s reached %q, not the API server", want, got)
		}
	}
	// The host does not see the pods' port.
	if connection, err := net.Dial("tcp", "127.0.0.1:18080"); err == nil {
		connection.Close()
		t.Error("a pod's port is open on the host")
	}
}
