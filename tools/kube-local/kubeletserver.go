package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// serveKubelet serves the part of the kubelet's HTTPS API that `kubectl
// logs` and `kubectl port-forward` need: the API server proxies a pod's
// logs to /containerLogs/NAMESPACE/POD/CONTAINER and its port-forward to
// /portForward/NAMESPACE/POD on the node's address and kubelet port. The
// certificate is self-signed: kube-local's API server is given no
// --kubelet-certificate-authority, so it does not verify the kubelet (as
// upstream without that flag). The TLS config offers no HTTP/2: a
// port-forward upgrades an HTTP/1.1 connection. It returns the port it
// listens on.
func (k *execKubelet) serveKubelet(ctx context.Context) (int, error) {
	certificate, err := selfSignedCertificate()
	if err != nil {
		return 0, err
	}
	listener, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{certificate}})
	if err != nil {
		return 0, err
	}
	server := &http.Server{Handler: k.kubeletAPI(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = server.Serve(listener) }()
	go func() {
		<-ctx.Done()
		_ = server.Close()
	}()
	return listener.Addr().(*net.TCPAddr).Port, nil
}

func (k *execKubelet) kubeletAPI() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/containerLogs/{namespace}/{pod}/{container}", k.containerLogs)
	mux.HandleFunc("/portForward/{namespace}/{pod}", k.portForward)
	mux.HandleFunc("/portForward/{namespace}/{pod}/{uid}", k.portForward)
	return mux
}

// containerLogs writes a container's log: all of it or its last
// `tailLines`, then, with `follow=true`, what the container writes until it
// terminates for good or the client goes away.
func (k *execKubelet) containerLogs(w http.ResponseWriter, r *http.Request) {
	namespace, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	path, ok := k.logPath(namespace, pod, container)
	if !ok {
		http.Error(w, "container "+container+" of pod "+namespace+"/"+pod+" is not running here", http.StatusNotFound)
		return
	}
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if tail, err := strconv.Atoi(r.URL.Query().Get("tailLines")); err == nil {
		data = lastLines(data, tail)
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(data)
	if r.URL.Query().Get("follow") != "true" {
		return
	}
	offset := int64(len(data))
	if info, err := os.Stat(path); err == nil {
		offset = info.Size()
	}
	flusher, _ := w.(http.Flusher)
	for {
		if flusher != nil {
			flusher.Flush()
		}
		done := k.done(namespace, pod, container)
		select {
		case <-r.Context().Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		file, err := os.Open(path)
		if err != nil {
			return
		}
		_, _ = file.Seek(offset, io.SeekStart)
		written, _ := io.Copy(w, file)
		file.Close()
		offset += written
		if done && written == 0 {
			return
		}
	}
}

// lastLines is the last n lines of data.
func lastLines(data []byte, n int) []byte {
	switch {
	case n < 0:
		return data
	case n == 0:
		return nil
	}
	trimmed := bytes.TrimSuffix(data, []byte("\n"))
	for i := len(trimmed) - 1; i >= 0; i-- {
		if trimmed[i] == '\n' {
			n--
			if n == 0 {
				return data[i+1:]
			}
		}
	}
	return data
}

func selfSignedCertificate() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	template := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: fakeNodeName},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
