package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
)

// InvokeAPI answers the Lambda Invoke API (POST
// /2015-03-31/functions/{name}/invocations) for functions running under the
// Runtime Interface Emulator, so that the functions' own async dispatch
// (InvocationType=Event) reaches them locally: point AWS_ENDPOINT_URL_LAMBDA
// of the functions at the server that mounts it.
type InvokeAPI struct {
	// Functions maps function names to their emulators.
	Functions map[string]*RemoteFunction
	Logger    *slog.Logger
	wg        sync.WaitGroup
}

// ServeHTTP handles one Invoke call: Event invocations are queued and
// answered 202 at once; RequestResponse ones wait for the result.
func (a *InvokeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
	name, ok2 := strings.CutSuffix(rest, "/invocations")
	if !ok || !ok2 || r.Method != http.MethodPost {
		writeJSON(w, http.StatusNotFound, "ResourceNotFoundException", "unknown Lambda API call")
		return
	}
	if i := strings.LastIndex(name, ":function:"); i >= 0 {
		name = name[i+len(":function:"):]
	}
	fn, found := a.Functions[name]
	if !found {
		writeJSON(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
		return
	}
	payload, err := io.ReadAll(io.LimitReader(r.Body, 6<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, "InvalidRequestContentException", "body could not be read")
		return
	}
	if r.Header.Get("X-Amz-Invocation-Type") == "Event" {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if _, err := fn.Invoke(context.WithoutCancel(r.Context()), payload); err != nil {
				a.log().Error("async invoke failed", "function", name, "err", err)
			}
		}()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out, err := fn.Invoke(r.Context(), payload)
	if err != nil {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// Wait blocks until every queued async invocation has finished.
func (a *InvokeAPI) Wait() { a.wg.Wait() }

func (a *InvokeAPI) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}
