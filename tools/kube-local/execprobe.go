package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probe runs container i's readiness and liveness probes while ctx lasts:
// readiness sets the container's ready flag, a failed liveness probe kills
// the process (the restart policy then applies). A probe dials into the
// pod's network namespace (the host's for a hostNetwork pod). HTTP GET and
// TCP probes are supported; exec and gRPC probes always succeed, and
// startup probes are not run.
func (p *execPod) probe(ctx context.Context, i int, container *corev1.Container, process *os.Process) {
	if probe := container.ReadinessProbe; probe != nil {
		go runProbe(ctx, probe, container, p.dialer(), func(ok bool) {
			p.update(i, func(run *containerRun) { run.ready = ok && run.running })
		})
	}
	if probe := container.LivenessProbe; probe != nil {
		go runProbe(ctx, probe, container, p.dialer(), func(ok bool) {
			if !ok {
				fmt.Fprintf(os.Stderr, "exec-kubelet: pod %s/%s: container %s failed its liveness probe; killing it\n",
					p.pod.Namespace, p.pod.Name, container.Name)
				p.kill(process)
			}
		})
	}
}

// probeState counts consecutive results against a probe's thresholds.
type probeState struct {
	successes, failures int32
	ok                  bool
}

// observe records one result and reports whether the probe's outcome
// changed (to ok): a success after successThreshold of them, a failure
// after failureThreshold. The outcome starts as failing.
func (s *probeState) observe(probe *corev1.Probe, success bool) (changed bool) {
	successThreshold, failureThreshold := probe.SuccessThreshold, probe.FailureThreshold
	if successThreshold < 1 {
		successThreshold = 1
	}
	if failureThreshold < 1 {
		failureThreshold = 3
	}
	if success {
		s.successes, s.failures = s.successes+1, 0
		if !s.ok && s.successes >= successThreshold {
			s.ok = true
			return true
		}
		return false
	}
	s.successes, s.failures = 0, s.failures+1
	if s.failures >= failureThreshold && (s.ok || s.failures == failureThreshold) {
		s.ok = false
		return true
	}
	return false
}

// dialFunc connects to an address in a pod's network.
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// dialer dials into the pod's network namespace, or the host's for a
// hostNetwork pod. Before the namespace exists it dials nowhere: the host
// is not the pod.
func (p *execPod) dialer() dialFunc {
	if p.pod.Spec.HostNetwork {
		var dialer net.Dialer
		return dialer.DialContext
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		namespace := p.network()
		if namespace == nil {
			return nil, errors.New("the pod's network namespace does not exist yet")
		}
		return namespace.dial(ctx, network, address)
	}
}

func runProbe(ctx context.Context, probe *corev1.Probe, container *corev1.Container, dial dialFunc, changed func(ok bool)) {
	period := time.Duration(probe.PeriodSeconds) * time.Second
	if period <= 0 {
		period = 10 * time.Second
	}
	timeout := time.Duration(probe.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	wait := time.Duration(probe.InitialDelaySeconds) * time.Second
	state := &probeState{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = period
		if state.observe(probe, probeOnce(ctx, probe, container, dial, timeout)) && ctx.Err() == nil {
			changed(state.ok)
		}
	}
}

// probeOnce runs probe once: an HTTP status in [200, 400) or an accepted
// TCP connection is a success.
func probeOnce(ctx context.Context, probe *corev1.Probe, container *corev1.Container, dial dialFunc, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case probe.HTTPGet != nil:
		get := probe.HTTPGet
		port, ok := probePort(get.Port, container)
		if !ok {
			return false
		}
		host := get.Host
		if host == "" {
			host = execPodIP
		}
		scheme := "http"
		if get.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), get.Path)
		request, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		for _, header := range get.HTTPHeaders {
			request.Header.Add(header.Name, header.Value)
		}
		// The kubelet does not verify a probed server's certificate.
		client := &http.Client{Transport: &http.Transport{
			DialContext:       dial,
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		}}
		response, err := client.Do(request)
		if err != nil {
			return false
		}
		_ = response.Body.Close()
		return response.StatusCode >= 200 && response.StatusCode < 400
	case probe.TCPSocket != nil:
		port, ok := probePort(probe.TCPSocket.Port, container)
		if !ok {
			return false
		}
		connection, err := dial(ctx, "tcp", net.JoinHostPort(execPodIP, strconv.Itoa(port)))
		if err != nil {
			return false
		}
		_ = connection.Close()
		return true
	}
	return true
}

// probePort resolves a probe's port, a number or the name of one of the
// container's ports.
func probePort(port intstr.IntOrString, container *corev1.Container) (int, bool) {
	if port.Type == intstr.Int {
		return port.IntValue(), port.IntValue() > 0
	}
	for _, p := range container.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), true
		}
	}
	return 0, false
}
