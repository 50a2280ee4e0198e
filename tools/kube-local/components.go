package main

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

// runEtcd runs a single-member embedded etcd on loopback until SIGTERM.
// The data directory is expected on tmpfs and fsync is off: this cluster is
// for tests and demos, and speed matters more than durability.
func runEtcd(args []string) error {
	flags := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := flags.String("data-dir", "", "data directory (tmpfs)")
	clientPort := flags.Int("client-port", 0, "client port on 127.0.0.1")
	peerPort := flags.Int("peer-port", 0, "peer port on 127.0.0.1")
	if err := flags.Parse(args); err != nil {
		return err
	}
	clientURL, err := loopbackURL(*clientPort)
	if err != nil {
		return fmt.Errorf("--client-port: %w", err)
	}
	peerURL, err := loopbackURL(*peerPort)
	if err != nil {
		return fmt.Errorf("--peer-port: %w", err)
	}

	cfg := embed.NewConfig()
	cfg.Name = "kube-local"
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.Name + "=" + peerURL.String()
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"

	server, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer server.Close()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-server.Server.ReadyNotify():
	case err := <-server.Err():
		return err
	}
	select {
	case <-signals:
		return nil
	case err := <-server.Err():
		return err
	}
}

// loopbackURL is http://127.0.0.1:PORT. Port 0 is refused: etcd would bind
// a random port but advertise :0.
func loopbackURL(port int) (url.URL, error) {
	if port < 1 || port > 65535 {
		return url.URL{}, fmt.Errorf("%d is not a TCP port", port)
	}
	return url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}, nil
}

// runAPIServer is the upstream kube-apiserver command, flags passed through.
func runAPIServer(args []string) error {
	command := apiserver.NewAPIServerCommand()
	command.SetArgs(args)
	return command.Execute()
}

// runControllerManager is the upstream kube-controller-manager command.
func runControllerManager(args []string) error {
	command := controllermanager.NewControllerManagerCommand()
	command.SetArgs(args)
	return command.Execute()
}
