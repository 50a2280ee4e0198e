package main

import (
	"flag"
	"reflect"
	"strings"
	"testing"
)

func TestUsageListsEveryFlag(t *testing.T) {
	for command, flags := range map[string]func() *flag.FlagSet{
		"up":         func() *flag.FlagSet { f, _ := upFlags(); return f },
		"kubeconfig": func() *flag.FlagSet { f, _ := kubeconfigFlags(); return f },
	} {
		// The command's own lines: from "kube-local COMMAND" to the next
		// command or section.
		start := strings.Index(usage, "  kube-local "+command+" ")
		if start < 0 {
			t.Fatalf("usage has no line for %q", command)
		}
		section := usage[start:]
		if end := strings.Index(section[1:], "\n  kube-local "); end >= 0 {
			section = section[:end+1]
		}
		if end := strings.Index(section, "\n\n"); end >= 0 {
			section = section[:end]
		}
		flags().VisitAll(func(f *flag.Flag) {
			if !strings.Contains(section, "--"+f.Name+" ") && !strings.Contains(section, "--"+f.Name+"]") {
				t.Errorf("usage of %q does not list --%s:\n%s", command, f.Name, section)
			}
		})
	}
}

func TestUpFlagsParse(t *testing.T) {
	flags, o := upFlags()
	err := flags.Parse([]string{"--dir", "d", "--fake-kubelet", "--port", "6443", "--audit-log", "a.log"})
	if err != nil {
		t.Fatal(err)
	}
	want := upOptions{dir: "d", fakeKubelet: true, port: 6443, auditLog: "a.log"}
	if !reflect.DeepEqual(*o, want) {
		t.Errorf("got %+v, want %+v", *o, want)
	}
}

func TestKubeconfigGroupsRepeat(t *testing.T) {
	flags, o := kubeconfigFlags()
	err := flags.Parse([]string{"--dir", "d", "--user", "u", "--group", "a", "--group", "b", "--out", "f"})
	if err != nil {
		t.Fatal(err)
	}
	if o.dir != "d" || o.user != "u" || o.out != "f" || strings.Join(o.groups, ",") != "a,b" {
		t.Errorf("got %+v", *o)
	}
}
