package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestImageRepository(t *testing.T) {
	for image, want := range map[string]string{
		"tether.test/fail":                    "tether.test/fail",
		"tether.test/fail:1":                  "tether.test/fail",
		"tether.test/fail@sha256:abcd":        "tether.test/fail",
		"tether.test/fail:1@sha256:abcd":      "tether.test/fail",
		"localhost:5000/app":                  "localhost:5000/app",
		"localhost:5000/app:2":                "localhost:5000/app",
		"nginx":                               "nginx",
		"example.com/team/failover-proxy:1.0": "example.com/team/failover-proxy",
	} {
		if got := imageRepository(image); got != want {
			t.Errorf("imageRepository(%q) = %q, want %q", image, got, want)
		}
	}
}

func testPod(image string, restart corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec: corev1.PodSpec{
			RestartPolicy: restart,
			Containers:    []corev1.Container{{Name: "c", Image: image}},
		},
	}
}

func TestStatusForTestImages(t *testing.T) {
	k := &fakeKubelet{}
	cases := []struct {
		image   string
		restart corev1.RestartPolicy
		phase   corev1.PodPhase
		reason  string // waiting or terminated reason; "" when running
		exit    int32
	}{
		{"nginx:1.27", corev1.RestartPolicyAlways, corev1.PodRunning, "", 0},
		{"tether.test/crashloop:1", corev1.RestartPolicyAlways, corev1.PodRunning, "CrashLoopBackOff", 0},
		{"tether.test/badimage:1", corev1.RestartPolicyAlways, corev1.PodPending, "ImagePullBackOff", 0},
		{"tether.test/fail:1", corev1.RestartPolicyNever, corev1.PodFailed, "Error", 1},
		{"tether.test/fail:1", corev1.RestartPolicyOnFailure, corev1.PodFailed, "Error", 1},
		// A restarting pod never reports a failed run.
		{"tether.test/fail:1", corev1.RestartPolicyAlways, corev1.PodRunning, "", 0},
		{"example.com/job:1", corev1.RestartPolicyNever, corev1.PodSucceeded, "Completed", 0},
		// Names merely containing a marker word are ordinary images.
		{"example.com/fail:1", corev1.RestartPolicyNever, corev1.PodSucceeded, "Completed", 0},
		{"example.com/failover:1", corev1.RestartPolicyNever, corev1.PodSucceeded, "Completed", 0},
		{"example.com/crashloop:1", corev1.RestartPolicyAlways, corev1.PodRunning, "", 0},
		{"example.com/badimage:1", corev1.RestartPolicyAlways, corev1.PodRunning, "", 0},
		{"tether.test/failing:1", corev1.RestartPolicyNever, corev1.PodSucceeded, "Completed", 0},
	}
	for _, c := range cases {
		status := k.statusFor(testPod(c.image, c.restart), 0)
		if status.Phase != c.phase {
			t.Errorf("%s (%s): phase %s, want %s", c.image, c.restart, status.Phase, c.phase)
		}
		if len(status.ContainerStatuses) != 1 {
			t.Fatalf("%s: %d container statuses", c.image, len(status.ContainerStatuses))
		}
		state := status.ContainerStatuses[0].State
		reason, exit := "", int32(0)
		switch {
		case state.Waiting != nil:
			reason = state.Waiting.Reason
		case state.Terminated != nil:
			reason, exit = state.Terminated.Reason, state.Terminated.ExitCode
		case state.Running == nil:
			t.Errorf("%s: no container state", c.image)
		}
		if reason != c.reason || exit != c.exit {
			t.Errorf("%s (%s): reason %q exit %d, want %q exit %d", c.image, c.restart, reason, exit, c.reason, c.exit)
		}
	}
}

func TestCrashLoopingNeedsTheExactImage(t *testing.T) {
	if !crashLooping(testPod("tether.test/crashloop:2", "")) {
		t.Error("tether.test/crashloop:2 is not crash-looping")
	}
	if crashLooping(testPod("example.com/crashloop-detector:1", "")) {
		t.Error("an image merely containing \"crashloop\" is crash-looping")
	}
}
