package report

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster"
)

// The merged report names the NVLink domain each host published at the
// start (what the planner paired across): summary.json's host entries and
// a line of summary.txt; a host without one has none, and a run without
// any domain prints no such line.
func TestClusterReportNamesNVLinkDomains(t *testing.T) {
	const rack = "6b0c2d1e-0000-4000-8000-00000000000a/32766"
	root := clusterFolder(t, nil)
	var txt bytes.Buffer
	require.NoError(t, mergeCluster(t, root).WriteText(&txt))
	assert.NotContains(t, txt.String(), "NVLink domains")

	hosts := []string{"vm1", "vm2", "vm3", "vm4"}
	doms := map[string]string{"vm1": rack, "vm3": rack}
	var wg sync.WaitGroup
	errs := make([]error, len(hosts))
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = cluster.Start(context.Background(), cluster.BarrierOptions{Root: root, Self: h, Hosts: hosts,
				Timeout: time.Minute, Poll: 5 * time.Millisecond, Domain: doms[h]})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	rep := mergeCluster(t, root)
	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var doc struct {
		Hosts []struct {
			Host         string  `json:"host"`
			NVLinkDomain *string `json:"nvlink_domain"`
		} `json:"hosts"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
	require.Len(t, doc.Hosts, 4)
	for _, h := range doc.Hosts {
		if d, ok := doms[h.Host]; ok {
			require.NotNil(t, h.NVLinkDomain, h.Host)
			assert.Equal(t, d, *h.NVLinkDomain, h.Host)
		} else {
			assert.Nil(t, h.NVLinkDomain, "%s: absent, not empty", h.Host)
		}
	}
	txt.Reset()
	require.NoError(t, rep.WriteText(&txt))
	line := "NVLink domains (pairs planned across them): " + rack + ": vm1, vm3; 2 hosts in none"
	assert.Contains(t, txt.String(), "  "+line+"\n")
	// report.html and summary.md read the same line (one view model).
	var page, md bytes.Buffer
	require.NoError(t, rep.WriteHTML(&page))
	assert.Contains(t, page.String(), `<p id="nvlink-domains">`+line+`</p>`)
	require.NoError(t, rep.WriteMarkdown(&md))
	assert.Contains(t, md.String(), "\n"+line+"\n")
	page.Reset()
	require.NoError(t, mergeCluster(t, clusterFolder(t, nil)).WriteHTML(&page))
	assert.NotContains(t, page.String(), "nvlink-domains", "no domain published: no line")
}
