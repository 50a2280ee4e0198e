package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
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
	clientURL, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", *clientPort))
	peerURL, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", *peerPort))

	cfg := embed.NewConfig()
	cfg.Name = "kube-local"
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
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
