package main

import "testing"

func TestLoopbackURL(t *testing.T) {
	u, err := loopbackURL(2379)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.String(); got != "http://127.0.0.1:2379" {
		t.Errorf("got %s", got)
	}
	for _, port := range []int{0, -1, 65536} {
		if _, err := loopbackURL(port); err == nil {
			t.Errorf("port %d accepted", port)
		}
	}
}
