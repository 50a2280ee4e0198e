package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExecImageFlagParsesImageEqualsPath(t *testing.T) {
	var images execImages
	for _, value := range []string{"tether:dev=/bin/tether", "registry.local:5000/x:1=/opt/x"} {
		if err := images.Set(value); err != nil {
			t.Fatalf("%s: %v", value, err)
		}
	}
	want := execImages{"tether:dev": "/bin/tether", "registry.local:5000/x:1": "/opt/x"}
	if !reflect.DeepEqual(images, want) {
		t.Errorf("got %v, want %v", images, want)
	}
	for _, bad := range []string{"tether:dev", "=/bin/x", "tether:dev="} {
		if err := images.Set(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

func podOf(images ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "uid-1"}}
	for i, image := range images {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: image})
	}
	return pod
}

func TestOnlyPodsWhoseEveryImageIsAllowListedRun(t *testing.T) {
	images := execImages{"tether:dev": "/bin/tether", "helper:1": "/bin/helper"}
	cases := []struct {
		pod  *corev1.Pod
		want map[string]string
	}{
		{podOf("tether:dev"), map[string]string{"a": "/bin/tether"}},
		{podOf("tether:dev", "helper:1"), map[string]string{"a": "/bin/tether", "b": "/bin/helper"}},
		{podOf("tether:dev", "nginx:1"), nil},
		// The reference must match exactly: another tag is another image.
		{podOf("tether:latest"), nil},
		{podOf("docker.io/library/tether:dev"), nil},
		{podOf(), nil},
	}
	for _, c := range cases {
		got, ok := images.programsFor(c.pod)
		if ok != (c.want != nil) || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: got %v %v, want %v", c.pod.Spec.Containers, got, ok, c.want)
		}
	}
	withInit := podOf("tether:dev")
	withInit.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "tether:dev"}}
	if _, ok := images.programsFor(withInit); ok {
		t.Error("a pod with init containers runs for real")
	}
	if _, ok := (execImages{}).programsFor(podOf("tether:dev")); ok {
		t.Error("an empty allow-list runs a pod")
	}
	var none *execKubelet
	if _, ok := none.programsFor(podOf("tether:dev")); ok {
		t.Error("no exec kubelet runs a pod")
	}
}

func TestTheProgramIsTheEntrypointAndACommandsFirstWordStandsForIt(t *testing.T) {
	cases := []struct {
		command, args, want []string
	}{
		{nil, []string{"run", "--namespace", "x"}, []string{"/bin/tether", "run", "--namespace", "x"}},
		{[]string{"tether", "run"}, []string{"-v"}, []string{"/bin/tether", "run", "-v"}},
		{[]string{"/usr/local/bin/tether"}, []string{"status"}, []string{"/bin/tether", "status"}},
		{nil, nil, []string{"/bin/tether"}},
		{nil, []string{"--identity", "$(POD_NAME)", "$(UNSET)", "$$(POD_NAME)"},
			[]string{"/bin/tether", "--identity", "web-1", "$(UNSET)", "$(POD_NAME)"}},
	}
	for _, c := range cases {
		got := containerArgv("/bin/tether", &corev1.Container{Command: c.command, Args: c.args}, []string{"POD_NAME=web-1"})
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("command %v args %v: got %v, want %v", c.command, c.args, got, c.want)
		}
	}
}

func TestContainerEnvPointsAtTheAPIServerAndResolvesFieldRefs(t *testing.T) {
	pod := podOf("tether:dev")
	pod.Spec.ServiceAccountName = "tether"
	container := &corev1.Container{Env: []corev1.EnvVar{
		{Name: "GREETING", Value: "hello"},
		{Name: "MESSAGE", Value: "$(GREETING) from $(POD_NAME) $(UNDEFINED) $$(GREETING)"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "ACCOUNT", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
		{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
		{Name: "HOME", Value: "/override"},
	}}
	env := map[string]string{}
	for _, entry := range containerEnv(pod, container, "/pods/uid-1/home", "127.0.0.1", "6443") {
		name, value, _ := strings.Cut(entry, "=")
		env[name] = value
	}
	want := map[string]string{
		"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443",
		"GREETING": "hello", "POD_NAME": "web-1", "POD_NAMESPACE": "shop", "POD_IP": podIP(pod),
		"ACCOUNT": "tether", "SECRET": "", "HOME": "/override", "HOSTNAME": "web-1",
		// Expanded in order: POD_NAME is defined after MESSAGE.
		"MESSAGE": "hello from $(POD_NAME) $(UNDEFINED) $(GREETING)",
	}
	for name, value := range want {
		if env[name] != value {
			t.Errorf("%s=%q, want %q", name, env[name], value)
		}
	}
	if _, ok := env["KUBECONFIG"]; ok {
		t.Error("KUBECONFIG leaked into the container")
	}
	if !strings.HasPrefix(containerEnv(pod, &corev1.Container{}, "/h", "h", "1")[1], "HOME=/h") {
		t.Error("HOME is not the pod's own directory by default")
	}
}

func TestRestartPolicyDecidesWhichExitsRestart(t *testing.T) {
	cases := []struct {
		policy corev1.RestartPolicy
		code   int32
		want   bool
	}{
		{corev1.RestartPolicyAlways, 0, true},
		{corev1.RestartPolicyAlways, 1, true},
		{"", 0, true},
		{corev1.RestartPolicyOnFailure, 0, false},
		{corev1.RestartPolicyOnFailure, 137, true},
		{corev1.RestartPolicyNever, 1, false},
		{corev1.RestartPolicyNever, 0, false},
	}
	for _, c := range cases {
		if got := shouldRestart(c.policy, c.code); got != c.want {
			t.Errorf("%q exit %d: restart %v, want %v", c.policy, c.code, got, c.want)
		}
	}
}

func TestRestartBackOffDoublesUpToItsCeiling(t *testing.T) {
	var got []time.Duration
	for failures := 1; failures <= 8; failures++ {
		got = append(got, restartDelay(failures))
	}
	want := []time.Duration{2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("delays %v, want %v seconds", got, want)
		}
	}
}

func TestAContainerBackingOffIsInCrashLoopBackOffWithItsLastExit(t *testing.T) {
	now := time.Now()
	run := containerRun{name: "c", image: "tether:dev", restarts: 2, backingOff: true,
		exited: true, exitCode: 3, lastRun: now.Add(-time.Second), finished: now}
	status := containerStatus(run)
	if status.State.Waiting == nil || status.State.Waiting.Reason != "CrashLoopBackOff" {
		t.Fatalf("state %+v, want waiting CrashLoopBackOff", status.State)
	}
	last := status.LastTerminationState.Terminated
	if last == nil || last.ExitCode != 3 || last.Reason != "Error" || status.RestartCount != 2 || status.Ready {
		t.Errorf("status %+v", status)
	}
	if podPhase([]containerRun{run}) != corev1.PodRunning {
		t.Errorf("a crash-looping pod is %s, want Running", podPhase([]containerRun{run}))
	}
}

func TestContainerStatesAndPodPhase(t *testing.T) {
	running := containerRun{name: "r", running: true, started: time.Now(), ready: true}
	completed := containerRun{name: "c", terminated: true, exited: true, exitCode: 0}
	failed := containerRun{name: "f", terminated: true, exited: true, exitCode: 1}
	creating := containerRun{name: "w"}
	misconfigured := containerRun{name: "m", waitingReason: "CreateContainerConfigError", message: "no ServiceAccount"}
	cases := []struct {
		runs []containerRun
		want corev1.PodPhase
	}{
		{[]containerRun{running}, corev1.PodRunning},
		{[]containerRun{completed}, corev1.PodSucceeded},
		{[]containerRun{completed, failed}, corev1.PodFailed},
		{[]containerRun{completed, running}, corev1.PodRunning},
		{[]containerRun{creating}, corev1.PodPending},
		{[]containerRun{misconfigured}, corev1.PodPending},
	}
	for _, c := range cases {
		if got := podPhase(c.runs); got != c.want {
			t.Errorf("%+v: phase %s, want %s", c.runs, got, c.want)
		}
	}
	if s := containerStatus(completed).State.Terminated; s == nil || s.Reason != "Completed" {
		t.Errorf("completed: %+v", s)
	}
	if s := containerStatus(misconfigured).State.Waiting; s == nil || s.Reason != "CreateContainerConfigError" || s.Message != "no ServiceAccount" {
		t.Errorf("misconfigured: %+v", s)
	}
	if s := containerStatus(creating).State.Waiting; s == nil || s.Reason != "ContainerCreating" {
		t.Errorf("creating: %+v", s)
	}
	if s := containerStatus(running); s.State.Running == nil || !s.Ready || !*s.Started {
		t.Errorf("running: %+v", s)
	}
}

func TestProbeOutcomeFollowsItsThresholds(t *testing.T) {
	probe := &corev1.Probe{SuccessThreshold: 2, FailureThreshold: 2}
	state := &probeState{}
	var changes []bool
	for _, result := range []bool{true, true, true, false, true, false, false, false, true, true} {
		if state.observe(probe, result) {
			changes = append(changes, state.ok)
		}
	}
	if want := []bool{true, false, true}; !reflect.DeepEqual(changes, want) {
		t.Errorf("changes %v, want %v", changes, want)
	}
}

func TestLastLines(t *testing.T) {
	data := []byte("a\nb\nc\n")
	for n, want := range map[int]string{-1: "a\nb\nc\n", 0: "", 1: "c\n", 2: "b\nc\n", 3: "a\nb\nc\n", 9: "a\nb\nc\n"} {
		if got := string(lastLines(data, n)); got != want {
			t.Errorf("last %d lines: %q, want %q", n, got, want)
		}
	}
}

func TestExecImagesNeedTheKubeletAndAnExecutable(t *testing.T) {
	if err := checkExecImages(execImages{"x:1": "/bin/sh"}, false); err == nil {
		t.Error("--exec-image without --fake-kubelet was accepted")
	}
	if err := checkExecImages(execImages{"x:1": "sh"}, true); err == nil {
		t.Error("a relative program was accepted")
	}
	if err := checkExecImages(execImages{"x:1": "/"}, true); err == nil {
		t.Error("a directory was accepted")
	}
	if err := checkExecImages(execImages{"x:1": "/bin/sh"}, true); err != nil {
		t.Error(err)
	}
}
