package rc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gdrconf/gdrconf/internal/config"
)

// A software device gets the longer ACK timer unless GDR_IB_TIMEOUT was
// set; a hardware NIC keeps perftest's 67 ms.
func TestAckTimeout(t *testing.T) {
	def := config.Config{IBTimeout: 14}
	assert.Equal(t, 14, AckTimeout(def, false))
	assert.Equal(t, SoftwareIBTimeout, AckTimeout(def, true))
	assert.Equal(t, 12, AckTimeout(config.Config{IBTimeout: 12, IBTimeoutSet: true}, true), "the operator's value stands")
	assert.Equal(t, 20, AckTimeout(config.Config{IBTimeout: 20}, true), "never shortened")
	assert.Equal(t, 1073741824*time.Nanosecond, AckDuration(SoftwareIBTimeout))
	assert.Equal(t, 67108864*time.Nanosecond, AckDuration(14))
	assert.Zero(t, AckDuration(0))
}
