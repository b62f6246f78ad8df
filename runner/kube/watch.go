package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// podWatch follows the runner's Pods (those with its instance label)
// through one informer, started on first use, and wakes whoever waits for
// a Pod's change. It is safe for concurrent use.
type podWatch struct {
	cs        kubernetes.Interface
	namespace string
	instance  string
	log       *slog.Logger

	startOnce sync.Once
	stopCh    chan struct{}
	stopOnce  sync.Once
	synced    chan struct{} // closed once the informer's cache is filled
	lister    listersv1.PodLister

	mu      sync.Mutex
	waiters map[string]chan struct{} // closed on the named Pod's next change
}

func newPodWatch(cs kubernetes.Interface, namespace, instance string, log *slog.Logger) *podWatch {
	return &podWatch{cs: cs, namespace: namespace, instance: instance, log: log,
		stopCh: make(chan struct{}), synced: make(chan struct{}), waiters: map[string]chan struct{}{}}
}

// start starts the informer once and waits until its cache is filled or
// ctx ends (runner.ErrUnavailable: the cluster did not answer).
func (w *podWatch) start(ctx context.Context) error {
	w.startOnce.Do(func() {
		factory := informers.NewSharedInformerFactoryWithOptions(w.cs, 0,
			informers.WithNamespace(w.namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = runner.LabelInstance + "=" + w.instance }))
		inf := factory.Core().V1().Pods()
		_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.changed(obj) },
			UpdateFunc: func(_, obj any) { w.changed(obj) },
			DeleteFunc: func(obj any) { w.changed(obj) },
		})
		w.lister = inf.Lister()
		factory.Start(w.stopCh)
		go func() {
			if cache.WaitForCacheSync(w.stopCh, inf.Informer().HasSynced) {
				close(w.synced)
			}
		}()
	})
	select {
	case <-w.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("watch the runner's Pods: %w: %w", runner.ErrUnavailable, ctx.Err())
	}
}

// stop stops the informer.
func (w *podWatch) stop() { w.stopOnce.Do(func() { close(w.stopCh) }) }

// changed wakes the waiters of the Pod obj is (or was).
func (w *podWatch) changed(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.waiters[p.Name]; ok {
		close(ch)
		delete(w.waiters, p.Name)
	}
}

// get returns the Pod as last seen, or nil when it does not exist (or
// was not seen yet).
func (w *podWatch) get(name string) *corev1.Pod {
	p, err := w.lister.Pods(w.namespace).Get(name)
	if err != nil {
		return nil
	}
	return p
}

// next returns a channel closed on the named Pod's next change.
func (w *podWatch) next(name string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.waiters[name]
	if !ok {
		ch = make(chan struct{})
		w.waiters[name] = ch
	}
	return ch
}

// wait calls done with the Pod as last seen (nil once it is gone) until
// it reports true or an error, or ctx ends (ctx's error). Call start
// first.
func (w *podWatch) wait(ctx context.Context, name string, done func(*corev1.Pod) (bool, error)) (*corev1.Pod, error) {
	for {
		ch := w.next(name) // before the look, so no change is missed
		p := w.get(name)
		ok, err := done(p)
		if err != nil || ok {
			return p, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return p, ctx.Err()
		}
	}
}

// waitGone waits until the named Pod no longer exists.
func (w *podWatch) waitGone(ctx context.Context, name string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	for {
		if _, err := w.wait(ctx, name, func(p *corev1.Pod) (bool, error) { return p == nil, nil }); err != nil {
			return fmt.Errorf("wait for pod %s to be deleted: %w", name, err)
		}
		// The cache may not have seen a Pod created a moment ago: the API
		// server has the last word.
		ch := w.next(name)
		_, err := w.cs.CoreV1().Pods(w.namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return apiErr("get pod "+name, err)
		}
		select {
		case <-ch:
		case <-time.After(time.Second):
		case <-ctx.Done():
			return fmt.Errorf("wait for pod %s to be deleted: %w", name, ctx.Err())
		}
	}
}

// sandboxStatus is the status of a Pod's sandbox container, or nil.
func sandboxStatus(p *corev1.Pod) *corev1.ContainerStatus {
	if p == nil {
		return nil
	}
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == containerName {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}
