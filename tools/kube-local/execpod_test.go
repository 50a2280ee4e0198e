package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
)

// TestMain lets this test binary stand for kube-local when a control
// plane starts its components, or the exec kubelet `exec-container`,
// through os.Executable; and for the programs of the test images.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if run, ok := testCommands()[os.Args[1]]; ok {
			if err := run(os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// testCommands are kube-local's commands and the test images' programs.
func testCommands() map[string]func(args []string) error {
	all := commands()
	all["greet"] = runGreeter
	return all
}

// shellPod is a pod of one container running `sh -c script`, without a
// ServiceAccount token (the fake client issues none).
func shellPod(script string, restart corev1.RestartPolicy, grace int64) *corev1.Pod {
	no := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec: corev1.PodSpec{
			RestartPolicy: restart, AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: "sh:test", Args: []string{"-c", script}}},
		},
	}
}

// runShellPod starts pod on an exec kubelet with a fake API server.
func runShellPod(t *testing.T, pod *corev1.Pod) (*execKubelet, *fake.Clientset) {
	t.Helper()
	return runPod(t, pod, execImages{"sh:test": "/bin/sh"})
}

// runPod starts pod on an exec kubelet that runs images, with a fake API
// server.
func runPod(t *testing.T, pod *corev1.Pod, images execImages) (*execKubelet, *fake.Clientset) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running containers in a mount namespace of their own needs root")
	}
	client := fake.NewSimpleClientset(pod)
	k := &execKubelet{client: client, images: images, podsDir: t.TempDir(),
		apiHost: "127.0.0.1", apiPort: "6443", pods: map[types.UID]*execPod{}}
	programs, ok := k.programsFor(pod)
	if !ok {
		t.Fatal("the pod is not run")
	}
	k.ensure(pod, programs)
	t.Cleanup(func() { k.terminate(pod) })
	return k, client
}

// waitForStatus polls the pod's status until check holds.
func waitForStatus(t *testing.T, client *fake.Clientset, what string, check func(corev1.PodStatus) bool) corev1.PodStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pod, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
		if err == nil && check(pod.Status) {
			return pod.Status
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; status %+v", what, pod.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitForTrap waits until the shell of pod p has set its SIGTERM trap (it
// says so in its log).
func waitForTrap(t *testing.T, k *execKubelet) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if path, ok := k.logPath("ns", "p", "c"); ok {
			if data, _ := os.ReadFile(path); string(data) == "trapped\n" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the shell's trap")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAPodThatExitsReportsItsExitCodeAndLogs(t *testing.T) {
	k, client := runShellPod(t, shellPod("echo out; echo err >&2; exit 7", corev1.RestartPolicyNever, 1))
	status := waitForStatus(t, client, "Failed", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodFailed })
	if exit := status.ContainerStatuses[0].State.Terminated; exit == nil || exit.ExitCode != 7 {
		t.Errorf("container state %+v, want terminated with 7", status.ContainerStatuses[0].State)
	}
	if status.PodIP == "" || strings.HasPrefix(status.PodIP, "127.") {
		t.Errorf("podIP %q: an EndpointSlice refuses loopback", status.PodIP)
	}
	path, ok := k.logPath("ns", "p", "c")
	if !ok {
		t.Fatal("no log for the container")
	}
	if data, _ := os.ReadFile(path); string(data) != "out\nerr\n" {
		t.Errorf("log %q", data)
	}
}

func TestAProgramInTheFolderOfAMountedVolumeStillRuns(t *testing.T) {
	// As a build in a clone under /tmp is, for a pod with an emptyDir at /tmp.
	folder := t.TempDir()
	program := filepath.Join(folder, "sh")
	shell, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(program, shell, 0o755); err != nil {
		t.Fatal(err)
	}
	pod := shellPod("echo ran", corev1.RestartPolicyNever, 1)
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch",
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: folder}}
	k, client := runPod(t, pod, execImages{"sh:test": program})
	waitForStatus(t, client, "Succeeded", func(s corev1.PodStatus) bool { return s.Phase == corev1.PodSucceeded })
	path, ok := k.logPath("ns", "p", "c")
	if !ok {
		t.Fatal("no log for the container")
	}
	if data, _ := os.ReadFile(path); string(data) != "ran\n" {
		t.Errorf("log %q", data)
	}
}

func TestAFailedLivenessProbeRestartsTheContainer(t *testing.T) {
	pod := shellPod("exec sleep 100", corev1.RestartPolicyAlways, 1)
	// Nothing listens on port 1.
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(1)}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
	_, client := runShellPod(t, pod)
	status := waitForStatus(t, client, "a restart", func(s corev1.PodStatus) bool {
		return len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].RestartCount > 0
	})
	last := status.ContainerStatuses[0].LastTerminationState.Terminated
	if last == nil || last.ExitCode != 128+15 {
		t.Errorf("last termination %+v, want SIGTERM's 143", last)
	}
}

func TestDeletionSendsSIGTERMAndSIGKILLAfterTheGracePeriod(t *testing.T) {
	// The shell exits on SIGTERM: the deletion does not wait for the grace.
	polite := shellPod("trap 'exit 0' TERM; echo trapped; while true; do sleep 0.1; done", corev1.RestartPolicyAlways, 20)
	k, _ := runShellPod(t, polite)
	waitForTrap(t, k)
	started := time.Now()
	if running, first := k.terminate(polite); !running || !first {
		t.Errorf("terminate: running %v, first %v", running, first)
	}
	if elapsed := time.Since(started); elapsed > 5*time.Second {
		t.Errorf("a container that exits on SIGTERM took %s to stop", elapsed)
	}

	// The shell ignores SIGTERM: it is killed after the grace period.
	stubborn := shellPod("trap '' TERM; echo trapped; while true; do sleep 0.1; done", corev1.RestartPolicyAlways, 1)
	stubborn.UID = "uid-2"
	k, _ = runShellPod(t, stubborn)
	waitForTrap(t, k)
	started = time.Now()
	k.terminate(stubborn)
	if elapsed := time.Since(started); elapsed < time.Second || elapsed > 10*time.Second {
		t.Errorf("a container that ignores SIGTERM stopped after %s, want the 1 s grace", elapsed)
	}
	if running, _ := k.terminate(stubborn); running {
		t.Error("a stopped pod is still known")
	}
}
