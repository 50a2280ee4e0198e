package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
)

const (
	fakeNodeName = "kube-local-node"
	// Images in the reserved test registry misbehave the way a real kubelet
	// would report it: tether.test/crashloop crash-loops, tether.test/badimage
	// cannot be pulled, tether.test/fail exits 1 (in a pod that does not
	// restart). Any tag or digest may follow. Every other image runs; an
	// image merely containing one of these words is not special.
	testImageRegistry = "tether.test/"
	crashLoopImage    = testImageRegistry + "crashloop"
	badImageImage     = testImageRegistry + "badimage"
	failImage         = testImageRegistry + "fail"
	crashRestartGap   = 10 * time.Second
)

// imageRepository is image without its tag or digest.
func imageRepository(image string) string {
	if at := strings.IndexByte(image, '@'); at >= 0 {
		image = image[:at]
	}
	if colon := strings.LastIndexByte(image, ':'); colon > strings.LastIndexByte(image, '/') {
		image = image[:colon]
	}
	return image
}

// runFakeKubelet registers one Ready node, binds every unscheduled pod to it
// and writes the pod status a kubelet would: Running and Ready, or
// CrashLoopBackOff / ImagePullBackOff, or Succeeded / Failed for pods that do
// not restart. Pods being deleted are removed at once.
func runFakeKubelet(args []string) error {
	flags := flag.NewFlagSet("fake-kubelet", flag.ContinueOnError)
	kubeconfig := flags.String("kubeconfig", "", "admin kubeconfig")
	var images execImages
	flags.Var(&images, "exec-image", "IMAGE=PATH: run pods of IMAGE as PATH (repeatable)")
	podsDir := flags.String("pods-dir", "", "where pods that really run keep their files")
	if err := flags.Parse(args); err != nil {
		return err
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	config.QPS, config.Burst = 200, 400
	config.UserAgent = "kube-local-fake-kubelet"
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	k := &fakeKubelet{client: client, queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	var kubeletPort int
	if len(images) > 0 {
		if k.exec, err = newExecKubelet(client, config, images, *podsDir); err != nil {
			return err
		}
		if kubeletPort, err = k.exec.serveKubelet(ctx); err != nil {
			return fmt.Errorf("serving the kubelet API: %w", err)
		}
	}
	if err := registerNode(ctx, client, kubeletPort); err != nil {
		return fmt.Errorf("registering node %s: %w", fakeNodeName, err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods()
	k.lister = pods.Lister()
	_, err = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.enqueue,
		UpdateFunc: func(_, obj interface{}) { k.enqueue(obj) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go k.bumpCrashLoops(ctx)
	for i := 0; i < 4; i++ {
		go k.work(ctx)
	}
	<-ctx.Done()
	k.queue.ShutDown()
	return nil
}

// registerNode registers the node; kubeletPort, when not 0, is where the
// API server finds its kubelet API (logs).
func registerNode(ctx context.Context, client kubernetes.Interface, kubeletPort int) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("5000"),
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fakeNodeName, Labels: map[string]string{
		"kubernetes.io/hostname": fakeNodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
	}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The node controller writes the new node too (taints, conditions):
	// read it again and retry when the status update loses that race.
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		created, err := client.CoreV1().Nodes().Get(ctx, fakeNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return postReadyStatus(ctx, client, created, capacity, kubeletPort)
	})
}

// postReadyStatus writes node's status: Ready, with capacity, and the
// kubelet's port unless 0.
func postReadyStatus(ctx context.Context, client kubernetes.Interface, created *corev1.Node, capacity corev1.ResourceList, kubeletPort int) error {
	now := metav1.Now()
	created.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kube-local fake kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v0.0.0-fake", OperatingSystem: "linux", Architecture: "amd64"},
	}
	if kubeletPort != 0 {
		created.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(kubeletPort)
	}
	_, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

type fakeKubelet struct {
	client kubernetes.Interface
	lister corelisters.PodLister
	queue  workqueue.TypedRateLimitingInterface[string]
	// exec runs the pods of allow-listed images for real (nil: none).
	exec *execKubelet
}

func (k *fakeKubelet) enqueue(obj interface{}) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		k.queue.Add(key)
	}
}

func (k *fakeKubelet) work(ctx context.Context) {
	for {
		key, shutdown := k.queue.Get()
		if shutdown {
			return
		}
		if err := k.sync(ctx, key); err != nil {
			fmt.Fprintf(os.Stderr, "fake-kubelet: pod %s: %v\n", key, err)
			k.queue.AddRateLimited(key)
		} else {
			k.queue.Forget(key)
		}
		k.queue.Done(key)
	}
}

func (k *fakeKubelet) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	pod, err := k.lister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pods := k.client.CoreV1().Pods(namespace)
	programs, runs := k.exec.programsFor(pod)
	switch {
	case pod.DeletionTimestamp != nil && runs:
		// Stop the containers, then finish the deletion as the kubelet
		// does; the worker does not wait for the grace period.
		go func() {
			if running, first := k.exec.terminate(pod); running && !first {
				return
			}
			zero := int64(0)
			_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		}()
		return nil
	case pod.DeletionTimestamp != nil:
		zero := int64(0)
		err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	case pod.Spec.NodeName == "":
		binding := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: fakeNodeName},
		}
		err := pods.Bind(ctx, binding, metav1.CreateOptions{})
		if apierrors.IsConflict(err) {
			return nil
		}
		return err
	case pod.Spec.NodeName == fakeNodeName && runs:
		k.exec.ensure(pod, programs)
		return nil
	case pod.Spec.NodeName == fakeNodeName && pod.Status.StartTime == nil:
		updated := pod.DeepCopy()
		updated.Status = k.statusFor(pod, 0)
		_, err := pods.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return nil
}

// statusFor is the status a kubelet would report for pod after restarts
// container restarts. The QoS class is the one the API server stored when
// it created the pod (it is immutable), computed as the kubelet does only
// when none is stored.
func (k *fakeKubelet) statusFor(pod *corev1.Pod, restarts int32) corev1.PodStatus {
	now := metav1.Now()
	started := pod.CreationTimestamp
	if pod.Status.StartTime != nil {
		started = *pod.Status.StartTime
	}
	restartsAlways := pod.Spec.RestartPolicy == "" || pod.Spec.RestartPolicy == corev1.RestartPolicyAlways
	status := corev1.PodStatus{
		HostIP:    "127.0.0.1",
		PodIP:     podIP(pod),
		StartTime: &started,
		QOSClass:  v1qos.GetPodQOS(pod),
	}
	phase, ready := corev1.PodRunning, true
	for _, container := range pod.Spec.Containers {
		// A kubelet with in-place resize (on by default since 1.33) reports
		// every container it created with the resources it gave it.
		state := corev1.ContainerStatus{
			Name: container.Name, Image: container.Image, ImageID: "fake://" + container.Image, RestartCount: restarts,
			Resources: container.Resources.DeepCopy(), AllocatedResources: container.Resources.Requests.DeepCopy(),
		}
		switch {
		case imageRepository(container.Image) == badImageImage:
			state.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: fmt.Sprintf("Back-off pulling image %q", container.Image)}
			// No container was created, so none has resources to report.
			state.Resources, state.AllocatedResources = nil, nil
			phase, ready = corev1.PodPending, false
		case imageRepository(container.Image) == crashLoopImage:
			state.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: fmt.Sprintf("back-off restarting failed container %s in pod %s", container.Name, pod.Name)}
			state.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: started, FinishedAt: now}
			if state.RestartCount == 0 {
				state.RestartCount = 1
			}
			ready = false
		case !restartsAlways && imageRepository(container.Image) == failImage:
			state.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: started, FinishedAt: now}
			phase, ready = corev1.PodFailed, false
		case !restartsAlways:
			state.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: now}
			if phase == corev1.PodRunning {
				phase = corev1.PodSucceeded
			}
			ready = false
		default:
			state.State.Running = &corev1.ContainerStateRunning{StartedAt: started}
			state.Ready = true
			started := true
			state.Started = &started
		}
		status.ContainerStatuses = append(status.ContainerStatuses, state)
	}
	status.Phase = phase
	condition := func(kind corev1.PodConditionType, ok bool) corev1.PodCondition {
		value := corev1.ConditionFalse
		if ok {
			value = corev1.ConditionTrue
		}
		return corev1.PodCondition{Type: kind, Status: value, LastTransitionTime: now}
	}
	status.Conditions = []corev1.PodCondition{
		condition(corev1.PodScheduled, true),
		condition(corev1.PodInitialized, true),
		condition(corev1.ContainersReady, ready),
		condition(corev1.PodReady, ready),
	}
	return status
}

// bumpCrashLoops restarts crash-looping containers every few seconds, so
// restart counts grow as on a real node.
func (k *fakeKubelet) bumpCrashLoops(ctx context.Context) {
	ticker := time.NewTicker(crashRestartGap)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		pods, err := k.lister.List(labels.Everything())
		if err != nil {
			continue
		}
		for _, pod := range pods {
			if pod.Spec.NodeName != fakeNodeName || pod.DeletionTimestamp != nil || !crashLooping(pod) {
				continue
			}
			updated := pod.DeepCopy()
			updated.Status = k.statusFor(pod, maxRestarts(pod)+1)
			_, _ = k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		}
	}
}

func crashLooping(pod *corev1.Pod) bool {
	for _, container := range pod.Spec.Containers {
		if imageRepository(container.Image) == crashLoopImage {
			return true
		}
	}
	return false
}

func maxRestarts(pod *corev1.Pod) int32 {
	var highest int32
	for _, status := range pod.Status.ContainerStatuses {
		if status.RestartCount > highest {
			highest = status.RestartCount
		}
	}
	return highest
}

// podIP derives a stable fake address from the pod's UID.
func podIP(pod *corev1.Pod) string {
	var sum uint32
	for _, b := range []byte(pod.UID) {
		sum = sum*31 + uint32(b)
	}
	return fmt.Sprintf("10.244.%d.%d", (sum>>8)%250+1, sum%250+1)
}
