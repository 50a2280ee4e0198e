package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const contextName = "kube-local"

// writeKubeconfig writes an embedded-credential kubeconfig atomically.
func writeKubeconfig(path, server, caPath, certPath, keyPath, user string) error {
	ca, err := os.ReadFile(caPath)
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(certPath)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(keyPath)
	if err != nil {
		return err
	}
	config := clientcmdapi.NewConfig()
	config.Clusters[contextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	config.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	config.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: user, Namespace: "default"}
	config.CurrentContext = contextName
	data, err := clientcmd.Write(*config)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data, 0o600)
}

// runKubeconfig mints a client certificate for a user (and groups) from the
// control plane's CA, e.g. a plain user or a member of a break-glass group.
func runKubeconfig(args []string) error {
	flags, o := kubeconfigFlags()
	if err := flags.Parse(args); err != nil {
		return err
	}
	if o.dir == "" || o.user == "" || o.out == "" {
		return fmt.Errorf("--dir, --user and --out are required")
	}
	admin, err := clientcmd.LoadFromFile(filepath.Join(o.dir, "kubeconfig"))
	if err != nil {
		return fmt.Errorf("reading the control plane's kubeconfig: %w", err)
	}
	cluster, ok := admin.Clusters[contextName]
	if !ok {
		return fmt.Errorf("%s has no cluster %q", filepath.Join(o.dir, "kubeconfig"), contextName)
	}
	server := cluster.Server
	p := pki{dir: filepath.Join(o.dir, "pki")}
	ca, caKey, err := p.loadCA()
	if err != nil {
		return err
	}
	certPath := p.path("user-" + o.user + ".crt")
	keyPath := p.path("user-" + o.user + ".key")
	if err := issueClient(ca, caKey, o.user, o.groups, certPath, keyPath); err != nil {
		return err
	}
	return writeKubeconfig(o.out, server, p.caCert(), certPath, keyPath, o.user)
}

// kubeconfigOptions are the flags of `kube-local kubeconfig`.
type kubeconfigOptions struct {
	dir, user, out string
	groups         stringList
}

// kubeconfigFlags defines the flags of `kube-local kubeconfig` (the usage
// text in main.go must list each of them; a test checks it).
func kubeconfigFlags() (*flag.FlagSet, *kubeconfigOptions) {
	o := &kubeconfigOptions{}
	flags := flag.NewFlagSet("kubeconfig", flag.ContinueOnError)
	flags.StringVar(&o.dir, "dir", "", "the directory given to `kube-local up`")
	flags.StringVar(&o.user, "user", "", "user name (certificate CN)")
	flags.StringVar(&o.out, "out", "", "where to write the kubeconfig")
	flags.Var(&o.groups, "group", "a group (certificate O); repeatable")
	return flags, o
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint([]string(*s)) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
