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
	flags := flag.NewFlagSet("kubeconfig", flag.ContinueOnError)
	dir := flags.String("dir", "", "the directory given to `kube-local up`")
	user := flags.String("user", "", "user name (certificate CN)")
	out := flags.String("out", "", "where to write the kubeconfig")
	var groups stringList
	flags.Var(&groups, "group", "a group (certificate O); repeatable")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *user == "" || *out == "" {
		return fmt.Errorf("--dir, --user and --out are required")
	}
	admin, err := clientcmd.LoadFromFile(filepath.Join(*dir, "kubeconfig"))
	if err != nil {
		return fmt.Errorf("reading the control plane's kubeconfig: %w", err)
	}
	server := admin.Clusters[contextName].Server
	p := pki{dir: filepath.Join(*dir, "pki")}
	ca, caKey, err := p.loadCA()
	if err != nil {
		return err
	}
	certPath := p.path("user-" + *user + ".crt")
	keyPath := p.path("user-" + *user + ".key")
	if err := issueClient(ca, caKey, *user, groups, certPath, keyPath); err != nil {
		return err
	}
	return writeKubeconfig(*out, server, p.caCert(), certPath, keyPath, *user)
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint([]string(*s)) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
