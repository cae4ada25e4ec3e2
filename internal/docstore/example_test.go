package docstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/agentgate/agentgate/internal/docstore"
	"github.com/agentgate/agentgate/internal/loop"
)

// Tools over a local folder: what an approver sees for a write, then the
// write itself.
func ExampleTools() {
	dir, err := os.MkdirTemp("", "docs")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	backend, err := docstore.NewDirBackend(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()

	tb, err := loop.NewToolbox(docstore.Tools(backend)...)
	if err != nil {
		log.Fatal(err)
	}
	write, _ := tb.Lookup(docstore.ToolWriteDocument)
	input := json.RawMessage(`{"path":"guide/intro.md","text":"Welcome!\n"}`)
	preview, _ := write.(loop.Previewer).Preview(context.Background(), input)
	fmt.Print(preview)
	res, _ := write.Call(loop.WithIdempotencyKey(context.Background(), "run-1/-/call-1"), input)
	fmt.Println(res.Content)
	// Output:
	// --- /dev/null
	// +++ b/guide/intro.md
	// @@ -0,0 +1 @@
	// +Welcome!
	// created guide/intro.md (9 bytes)
}
