package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
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

// sized is a container name of nginx asking for requests and limits,
// each written as "cpu=100m,memory=64Mi" ("" for none).
func sized(name, requests, limits string) corev1.Container {
	list := func(text string) corev1.ResourceList {
		if text == "" {
			return nil
		}
		out := corev1.ResourceList{}
		for _, pair := range strings.Split(text, ",") {
			name, quantity, _ := strings.Cut(pair, "=")
			out[corev1.ResourceName(name)] = resource.MustParse(quantity)
		}
		return out
	}
	return corev1.Container{Name: name, Image: "nginx:1.27", Resources: corev1.ResourceRequirements{Requests: list(requests), Limits: list(limits)}}
}

func TestStatusForReportsTheQoSClassAsTheKubeletDoes(t *testing.T) {
	k := &fakeKubelet{}
	const both = "cpu=500m,memory=128Mi"
	cases := []struct {
		name       string
		init       []corev1.Container
		containers []corev1.Container
		stored     corev1.PodQOSClass // status.qosClass the API server wrote
		want       corev1.PodQOSClass
	}{
		{name: "no requests or limits", containers: []corev1.Container{sized("a", "", "")}, want: corev1.PodQOSBestEffort},
		{name: "requests equal limits", containers: []corev1.Container{sized("a", both, both), sized("b", both, both)}, want: corev1.PodQOSGuaranteed},
		// The API server defaults unset requests to the limits before the
		// kubelet sees the pod; the class it stored is the one reported.
		{name: "limits only, requests defaulted", containers: []corev1.Container{sized("a", "", both)}, stored: corev1.PodQOSGuaranteed, want: corev1.PodQOSGuaranteed},
		{name: "requests only", containers: []corev1.Container{sized("a", "cpu=100m,memory=64Mi", "")}, want: corev1.PodQOSBurstable},
		{name: "requests below limits", containers: []corev1.Container{sized("a", "cpu=100m,memory=64Mi", both)}, want: corev1.PodQOSBurstable},
		{name: "a cpu limit only", containers: []corev1.Container{sized("a", "cpu=1", "cpu=1")}, want: corev1.PodQOSBurstable},
		{name: "one container without resources", containers: []corev1.Container{sized("a", both, both), sized("b", "", "")}, want: corev1.PodQOSBurstable},
		{name: "an init container without limits", init: []corev1.Container{sized("init", "cpu=100m", "")}, containers: []corev1.Container{sized("a", both, both)}, want: corev1.PodQOSBurstable},
		{name: "an init container with requests only", init: []corev1.Container{sized("init", "memory=64Mi", "")}, containers: []corev1.Container{sized("a", "", "")}, want: corev1.PodQOSBurstable},
		{name: "init containers guaranteed too", init: []corev1.Container{sized("init", both, both)}, containers: []corev1.Container{sized("a", both, both)}, want: corev1.PodQOSGuaranteed},
		{name: "only other resources", containers: []corev1.Container{sized("a", "ephemeral-storage=1Gi", "ephemeral-storage=1Gi")}, want: corev1.PodQOSBestEffort},
	}
	for _, c := range cases {
		pod := testPod("nginx:1.27", corev1.RestartPolicyAlways)
		pod.Spec.InitContainers, pod.Spec.Containers = c.init, c.containers
		pod.Status.QOSClass = c.stored
		if got := k.statusFor(pod, 0).QOSClass; got != c.want {
			t.Errorf("%s: QoS class %s, want %s", c.name, got, c.want)
		}
	}
}

func TestStatusForReportsTheResourcesOfEachCreatedContainer(t *testing.T) {
	k := &fakeKubelet{}
	pod := testPod("nginx:1.27", corev1.RestartPolicyAlways)
	pull := sized("pull", "cpu=1", "")
	pull.Image = "tether.test/badimage:1"
	pod.Spec.Containers = []corev1.Container{
		sized("app", "cpu=100m,memory=64Mi", "cpu=500m,memory=128Mi"),
		sized("sidecar", "", ""),
		pull,
	}
	statuses := k.statusFor(pod, 0).ContainerStatuses
	app := pod.Spec.Containers[0].Resources
	if got := statuses[0].Resources; got == nil || !equality.Semantic.DeepEqual(*got, app) {
		t.Errorf("app: resources %v, want %v", got, app)
	}
	if got := statuses[0].AllocatedResources; !equality.Semantic.DeepEqual(got, app.Requests) {
		t.Errorf("app: allocated %v, want %v", got, app.Requests)
	}
	if got := statuses[1].Resources; got == nil || len(got.Requests)+len(got.Limits) != 0 || statuses[1].AllocatedResources != nil {
		t.Errorf("sidecar: resources %v, allocated %v, want none", got, statuses[1].AllocatedResources)
	}
	if statuses[2].Resources != nil || statuses[2].AllocatedResources != nil {
		t.Errorf("pull: an image never pulled reports resources %v", statuses[2].Resources)
	}
}
