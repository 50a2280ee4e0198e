// Command kube-local runs a real Kubernetes control plane on 127.0.0.1 for
// Tether's tests and demo: embedded etcd and kube-apiserver, and optionally
// kube-controller-manager and a fake kubelet, all built from the upstream Go
// modules.
//
// It is one multi-call binary. `kube-local up` is the only command a person
// runs; it starts every component as a child process of itself (the other
// subcommands), so a crash in one component cannot take the supervisor down,
// and every child is killed by the kernel if the supervisor dies.
package main

import (
	"fmt"
	"os"
)

const usage = `kube-local: a local Kubernetes control plane built from upstream modules

Usage:
  kube-local up --dir DIR [--controller-manager] [--fake-kubelet]
                [--exec-image IMAGE=PATH]... [--port PORT] [--audit-log FILE]
      Start etcd and kube-apiserver on 127.0.0.1, write DIR/kubeconfig and
      print "READY <kubeconfig>". Stops on SIGTERM, SIGINT or stdin EOF.
      SIGUSR1 restarts kube-apiserver, SIGUSR2 restarts etcd (keeping its
      data), as a fault test needs; each restart, once the API server is
      ready again, appends the component's name to DIR/restarts.
      --controller-manager  also run kube-controller-manager
      --fake-kubelet        also run a fake kubelet with one Ready node
      --exec-image IMAGE=PATH
                            (with --fake-kubelet; repeatable) really run the
                            pods whose images are all listed: each container
                            is PATH as a host process (its entrypoint; a
                            command's first word stands for PATH), in a mount
                            namespace of its own with the pod's ServiceAccount
                            token, CA and namespace at
                            /var/run/secrets/kubernetes.io/serviceaccount and
                            its emptyDir volumes; restarts, probes, logs
                            (kubectl logs), kubectl port-forward and graceful
                            deletion as a kubelet. Each pod has a network
                            namespace of its own (only loopback: the pod
                            listens on 127.0.0.1; the API server is forwarded
                            in at its usual address) unless hostNetwork.
      --port PORT           kube-apiserver port (default: a free one)
      --audit-log FILE      write an API audit log (Metadata level) to FILE
  kube-local kubeconfig --dir DIR --user NAME [--group G]... --out FILE
      Write a kubeconfig for a client-certificate user signed by DIR's CA.

Internal (started by "up"):
  kube-local etcd | apiserver | controller-manager | fake-kubelet  [flags]
  kube-local exec-container [--bind SOURCE=TARGET]... -- PROGRAM ARGS...
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	command, args := os.Args[1], os.Args[2:]
	switch command {
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	}
	run, ok := commands()[command]
	if !ok {
		fmt.Fprintf(os.Stderr, "kube-local: unknown command %q\n\n%s", command, usage)
		os.Exit(2)
	}
	if err := run(args); err != nil {
		fmt.Fprintf(os.Stderr, "kube-local %s: %v\n", command, err)
		os.Exit(1)
	}
}

// commands are kube-local's subcommands by name. The tests' binary runs
// them too: it stands for kube-local when the control plane starts its
// components through os.Executable.
func commands() map[string]func(args []string) error {
	return map[string]func(args []string) error{
		"up":                 runUp,
		"kubeconfig":         runKubeconfig,
		"etcd":               runEtcd,
		"apiserver":          runAPIServer,
		"controller-manager": runControllerManager,
		"fake-kubelet":       runFakeKubelet,
		"exec-container":     runExecContainer,
	}
}
