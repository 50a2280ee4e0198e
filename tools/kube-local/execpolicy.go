package main

// The decisions of the exec kubelet, as pure functions: which pods run for
// real, with what command line and environment, when a container restarts
// and what status the pod reports. execpod.go carries them out.

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// execImages maps an image reference, exactly as written in a pod spec, to
// the host program that stands for it (`--exec-image IMAGE=PATH`).
type execImages map[string]string

func (e *execImages) String() string { return fmt.Sprint(map[string]string(*e)) }

func (e *execImages) Set(value string) error {
	image, path, ok := strings.Cut(value, "=")
	if !ok || image == "" || path == "" {
		return fmt.Errorf("%q is not IMAGE=PATH", value)
	}
	if *e == nil {
		*e = execImages{}
	}
	(*e)[image] = path
	return nil
}

// programsFor is the host program of each of pod's containers, or false
// when any container's image is not allow-listed: a pod runs for real only
// as a whole, else the fake behaviour applies. Init containers are not
// supported, so a pod with any is never run.
func (e execImages) programsFor(pod *corev1.Pod) (map[string]string, bool) {
	if len(e) == 0 || len(pod.Spec.Containers) == 0 || len(pod.Spec.InitContainers) > 0 {
		return nil, false
	}
	programs := map[string]string{}
	for _, container := range pod.Spec.Containers {
		path, ok := e[container.Image]
		if !ok {
			return nil, false
		}
		programs[container.Name] = path
	}
	return programs, true
}

// containerArgv is the command line of container run as program. The
// program is the image's entrypoint, so `args` alone follow it; a
// `command` replaces the entrypoint, and its first word (the program's
// name inside the image, e.g. "tether" or "/usr/local/bin/tether") stands
// for program: command[1:] and then args follow it. `$(VAR)` references
// to the container's environment env are expanded, as the kubelet does.
func containerArgv(program string, container *corev1.Container, env []string) []string {
	defined := map[string]string{}
	for _, variable := range env {
		name, value, _ := strings.Cut(variable, "=")
		defined[name] = value
	}
	var words []string
	if len(container.Command) > 0 {
		words = append(words, container.Command[1:]...)
	}
	argv := []string{program}
	for _, word := range append(words, container.Args...) {
		argv = append(argv, expandEnv(word, defined))
	}
	return argv
}

// containerEnv is the environment of container: a PATH, HOME (the pod's
// own empty directory, so no kubeconfig of the host is found), the API
// server as KUBERNETES_SERVICE_HOST/PORT, then the container's env, with
// `$(VAR)` references expanded as the kubelet does. Nothing else of the
// kubelet's own environment leaks in (no KUBECONFIG). Values from
// ConfigMaps and Secrets are not supported and are left empty.
func containerEnv(pod *corev1.Pod, container *corev1.Container, home, apiHost, apiPort string) []string {
	values := map[string]string{}
	var order []string
	set := func(name, value string) {
		if _, seen := values[name]; !seen {
			order = append(order, name)
		}
		values[name] = value
	}
	set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	set("HOME", home)
	set("HOSTNAME", pod.Name)
	set("KUBERNETES_SERVICE_HOST", apiHost)
	set("KUBERNETES_SERVICE_PORT", apiPort)
	set("KUBERNETES_SERVICE_PORT_HTTPS", apiPort)
	for _, variable := range container.Env {
		switch {
		case variable.ValueFrom == nil:
			set(variable.Name, expandEnv(variable.Value, values))
		case variable.ValueFrom.FieldRef != nil:
			set(variable.Name, fieldValue(pod, variable.ValueFrom.FieldRef.FieldPath))
		default:
			set(variable.Name, "")
		}
	}
	env := make([]string, 0, len(order))
	for _, name := range order {
		env = append(env, name+"="+values[name])
	}
	return env
}

// expandEnv replaces $(NAME) with NAME's value when it is defined; $$
// escapes a dollar; anything else stays as written.
func expandEnv(value string, defined map[string]string) string {
	var out strings.Builder
	for i := 0; i < len(value); i++ {
		if value[i] != '$' || i+1 == len(value) {
			out.WriteByte(value[i])
			continue
		}
		switch value[i+1] {
		case '$':
			out.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(value[i:], ')'); end > 0 {
				if v, ok := defined[value[i+2:i+end]]; ok {
					out.WriteString(v)
					i += end
					continue
				}
			}
		}
		out.WriteByte(value[i])
	}
	return out.String()
}

// fieldValue is the downward-API value of path for pod ("" when unknown).
func fieldValue(pod *corev1.Pod, path string) string {
	switch path {
	case "metadata.name":
		return pod.Name
	case "metadata.namespace":
		return pod.Namespace
	case "metadata.uid":
		return string(pod.UID)
	case "spec.nodeName":
		return pod.Spec.NodeName
	case "spec.serviceAccountName":
		return serviceAccountOf(pod)
	case "status.podIP":
		return execPodAddress(pod)
	case "status.hostIP":
		return execPodIP
	}
	return ""
}

// execPodAddress is the address a pod reports: the host's for a
// hostNetwork pod, else the fake kubelet's stable address from its UID,
// as a Service's EndpointSlice needs (the API server refuses loopback
// endpoints). Nothing is sent to it: probes and forwarding use loopback
// inside the pod's network namespace, and the address is not configured
// there (a program binding to it would fail).
func execPodAddress(pod *corev1.Pod) string {
	if pod.Spec.HostNetwork {
		return execPodIP
	}
	return podIP(pod)
}

// execPodIP: a pod's address inside its own network namespace, where only
// loopback exists (and the host's, for a hostNetwork pod).
const execPodIP = "127.0.0.1"

func serviceAccountOf(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return pod.Spec.ServiceAccountName
	}
	return "default"
}

// shouldRestart says whether a container that exited with code restarts
// under policy.
func shouldRestart(policy corev1.RestartPolicy, code int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	default:
		return true
	}
}

// The restart back-off: the kubelet's doubling, scaled down (the kubelet
// starts at 10 s and stops at 5 min) so that tests see a crash loop within
// seconds. A container that ran for backOffReset before exiting starts
// again from the first step.
const (
	backOffInitial = 2 * time.Second
	backOffMax     = 60 * time.Second
	backOffReset   = 2 * time.Minute
)

// restartDelay is the wait before the restart that follows failures
// consecutive failed runs (1 for the first).
func restartDelay(failures int) time.Duration {
	delay := backOffInitial
	for i := 1; i < failures && delay < backOffMax; i++ {
		delay *= 2
	}
	if delay > backOffMax {
		delay = backOffMax
	}
	return delay
}

// containerRun is what the exec kubelet knows of one container at a moment.
type containerRun struct {
	name, image string
	restarts    int32
	// Exactly one of: running since started; terminated (exited, with
	// code, and not restarting); backingOff (exited, restarting after a
	// delay); waitingReason (not started, e.g. CreateContainerConfigError).
	running       bool
	started       time.Time
	terminated    bool
	backingOff    bool
	waitingReason string
	message       string
	ready         bool
	// The last exit, if any.
	exited   bool
	exitCode int32
	finished time.Time
	lastRun  time.Time
}

// containerStatus is the status the kubelet reports for run.
func containerStatus(run containerRun) corev1.ContainerStatus {
	status := corev1.ContainerStatus{
		Name: run.name, Image: run.image, ImageID: "exec://" + run.image,
		RestartCount: run.restarts, Ready: run.ready,
	}
	exit := func() *corev1.ContainerStateTerminated {
		reason := "Completed"
		if run.exitCode != 0 {
			reason = "Error"
		}
		return &corev1.ContainerStateTerminated{
			ExitCode: run.exitCode, Reason: reason,
			StartedAt: metav1.NewTime(run.lastRun), FinishedAt: metav1.NewTime(run.finished),
		}
	}
	started := run.running
	status.Started = &started
	switch {
	case run.running:
		status.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(run.started)}
		if run.exited {
			status.LastTerminationState.Terminated = exit()
		}
	case run.terminated:
		status.State.Terminated = exit()
	case run.backingOff:
		status.State.Waiting = &corev1.ContainerStateWaiting{
			Reason:  "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off restarting failed container %s", run.name),
		}
		status.LastTerminationState.Terminated = exit()
	default:
		reason := run.waitingReason
		if reason == "" {
			reason = "ContainerCreating"
		}
		status.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: run.message}
	}
	return status
}

// podPhase is the phase of a pod whose containers are runs: Succeeded or
// Failed once every container terminated for good, Pending while none has
// started yet, else Running.
func podPhase(runs []containerRun) corev1.PodPhase {
	allTerminated, anyFailed, anyStarted := true, false, false
	for _, run := range runs {
		if !run.terminated {
			allTerminated = false
		}
		if run.terminated && run.exitCode != 0 {
			anyFailed = true
		}
		if run.running || run.exited {
			anyStarted = true
		}
	}
	switch {
	case allTerminated && anyFailed:
		return corev1.PodFailed
	case allTerminated:
		return corev1.PodSucceeded
	case !anyStarted:
		return corev1.PodPending
	}
	return corev1.PodRunning
}
