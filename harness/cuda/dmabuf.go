//go:build gpu

package cuda

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// dmabufMagic is DMA_BUF_MAGIC, the f_type of the kernel's dma-buf
// pseudo-filesystem (linux/magic.h), "DMAB".
const dmabufMagic = 0x444d4142

// DmabufInfo is what the kernel says about a file descriptor.
type DmabufInfo struct {
	IsDmabuf bool   // fstatfs f_type is DMA_BUF_MAGIC, or the link says dmabuf
	FSType   int64  // fstatfs f_type
	Link     string // readlink /proc/self/fd/N: "/dmabuf:" (>= 5.3) or "anon_inode:dmabuf"
	Exporter string // exp_name from /proc/self/fdinfo/N, when the kernel shows it
	Size     int64  // size from fdinfo, bytes; 0 when not shown
}

// InspectFD tells whether fd is a dma-buf. The process's own fd table is read
// from the live /proc whatever GDR_HOST_ROOT says: a recorded host tree
// cannot describe descriptors this process just opened.
func InspectFD(fd int) (DmabufInfo, error) {
	var info DmabufInfo
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return info, fmt.Errorf("fstatfs(fd %d): %w", fd, err)
	}
	info.FSType = int64(st.Type)
	self, err := hostfs.New("/")
	if err != nil {
		return info, err
	}
	n := strconv.Itoa(fd)
	info.Link, _ = self.ReadLink("/proc/self/fd/" + n)
	info.IsDmabuf = info.FSType == dmabufMagic ||
		strings.HasPrefix(info.Link, "/dmabuf:") || info.Link == "anon_inode:dmabuf"
	if s, err := self.ReadString("/proc/self/fdinfo/" + n); err == nil {
		for _, line := range strings.Split(s, "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch strings.TrimSpace(k) {
			case "exp_name":
				info.Exporter = v
			case "size":
				info.Size, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return info, nil
}
