package lab

import (
	"compress/gzip"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	ocimutate "github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ContainerImage is one image make lab-k8s builds: no registry can be
// reached, so each VM imports the archive into containerd (ctr images
// import) and the kubelet finds it present.
type ContainerImage struct {
	Ref        string   // localhost/gdrconf:lab
	Layer      string   // an uncompressed tar of the root filesystem
	Env        []string // the image config's environment
	Entrypoint []string
}

// WriteArchive writes im as a docker-save archive (what ctr images import
// reads, with its tag) to dst. The config names linux/amd64: containerd
// imports only images of a platform it runs.
func WriteArchive(im ContainerImage, dst string) error {
	ref, err := name.NewTag(im.Ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", im.Ref, err)
	}
	layer, err := tarball.LayerFromFile(im.Layer, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return fmt.Errorf("layer %s: %w", im.Layer, err)
	}
	img, err := ocimutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Env: im.Env, Entrypoint: im.Entrypoint, WorkingDir: "/"}
	if img, err = ocimutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if err := tarball.WriteToFile(dst, ref, img); err != nil {
		return fmt.Errorf("writing image %s to %s: %w", im.Ref, dst, err)
	}
	return nil
}
