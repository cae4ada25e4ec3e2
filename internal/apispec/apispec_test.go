package apispec_test

import (
	"testing"

	"github.com/agentgate/agentgate/internal/apispec"
)

func TestSpecLoads(t *testing.T) {
	for name, load := range map[string]func() (any, error){
		"full":    func() (any, error) { return apispec.Full() },
		"current": func() (any, error) { return apispec.Current() },
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := load(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
