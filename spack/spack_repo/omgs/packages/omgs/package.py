# Spack package for omgs (Spack >= 1.0, package API v2.0).
#   spack repo add ./spack/spack_repo/omgs
#   spack install omgs+cuda cuda_arch=90 ^openmpi
# docs/packaging.md: the checks, the externals for an offline install.
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage
from spack_repo.builtin.build_systems.rocm import ROCmPackage

from spack.package import *


class Omgs(CMakePackage, CudaPackage, ROCmPackage):
    """Merged gradient sparsification (OMGS-SGD) for data-parallel training on MPI and
    Kokkos: plans merged gradient groups at init, selects top-k with error feedback on the
    device and allgathers the sparse gradients with one non-blocking collective per group."""

    # The project's public repository. A local checkout is built with `spack develop`
    # (spack/spack.yaml), which never fetches.
    homepage = "https://github.com/omgs/omgs"
    git = "https://github.com/omgs/omgs.git"

    license("BSD-3-Clause")

    version("main", branch="main")

    variant("openmp", default=False, description="Use Kokkos' OpenMP backend on the host")
    variant("hwloc", default=True, description="Pin the progress thread with hwloc")
    variant("examples", default=True, description="Build and install the example MPI jobs")
    variant("shared", default=True, description="Build a shared libomgs")

    depends_on("cxx", type="build")
    depends_on("c", type="build")
    depends_on("cmake@3.20:", type="build")
    depends_on("mpi")
    # Kokkos 3.4 (Serial) and 4.x are what omgs is built and tested with; Kokkos 5 (C++20)
    # is not yet. Kokkos Kernels follows Kokkos' version.
    depends_on("kokkos@3.4:4")
    depends_on("kokkos-kernels@3.4:4")
    depends_on("hwloc@2:", when="+hwloc")
    depends_on("pkgconfig", type="build", when="+hwloc")
    depends_on("catch2", type="test")

    # Device variants as kokkos-kernels expresses them: its backend variants (openmp, cuda
    # with cuda_arch) are set alongside Kokkos'; it has no ROCm variant and follows
    # ^kokkos+rocm, so +rocm only reaches Kokkos.
    depends_on("kokkos@4: +openmp", when="+openmp")
    depends_on("kokkos-kernels+openmp", when="+openmp")
    # Kokkos 4 + CUDA: extended lambdas (the device kernels use KOKKOS_LAMBDA), nvcc_wrapper.
    for _arch in CudaPackage.cuda_arch_values:
        with when(f"+cuda cuda_arch={_arch}"):
            depends_on(f"kokkos@4: +cuda+cuda_lambda+wrapper cuda_arch={_arch}")
            depends_on(f"kokkos-kernels+cuda cuda_arch={_arch}")
    for _target in ROCmPackage.amdgpu_targets:
        depends_on(f"kokkos@4: +rocm amdgpu_target={_target}", when=f"+rocm amdgpu_target={_target}")

    conflicts("+cuda", when="+rocm", msg="choose one device backend")

    # Kokkos Kernels serves omgs-train-mlp: KokkosBlas::gemm on float, LayoutRight views, in
    # the default execution space. Kokkos Kernels instantiates kernels ahead of time (ETI)
    # per scalar, layout and execution/memory space; the builtin recipe's defaults
    # (scalars=double layouts=left, no execspace_*) cover none of these calls, which are then
    # compiled inside the example: compile time, not a link error (KokkosKernels_ETI_ONLY is
    # off). +kernels_eti asks for them; ~kernels_eti accepts any Kokkos Kernels (an external).
    variant(
        "kernels_eti",
        default=True,
        when="+examples",
        description="Ask Kokkos Kernels to pre-instantiate the kernels omgs-train-mlp calls",
    )
    with when("+examples +kernels_eti"):
        depends_on("kokkos-kernels scalars=float layouts=right")
        depends_on("kokkos-kernels+execspace_openmp", when="+openmp")
        depends_on("kokkos-kernels+execspace_cuda+memspace_cudaspace", when="+cuda")
        depends_on("kokkos-kernels+serial+execspace_serial", when="^kokkos+serial")

    # cmake_args() sets CMAKE_CXX_COMPILER to Spack's compiler wrapper for host builds; the
    # installed omgs.pc (variable cxx) and omgsConfig.cmake name the real compiler instead.
    for _libdir in ("lib", "lib64"):  # GNUInstallDirs' choice on the system
        filter_compiler_wrappers("omgs.pc", relative_root=join_path(_libdir, "pkgconfig"))
        filter_compiler_wrappers("omgsConfig.cmake", relative_root=join_path(_libdir, "cmake", "omgs"))

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("BUILD_SHARED_LIBS", "shared"),
            self.define_from_variant("OMGS_ENABLE_EXAMPLES", "examples"),
            self.define_from_variant("OMGS_ENABLE_HWLOC", "hwloc"),
            self.define("OMGS_ENABLE_TESTS", self.run_tests),
            self.define("OMGS_ENABLE_BENCHMARKS", False),
            # The libtorch example needs Debian's libtorch-dev and Fashion-MNIST: not a
            # Spack dependency; never picked up from the host system here.
            self.define("OMGS_ENABLE_TORCH_EXAMPLE", "OFF"),
            self.define("Kokkos_ROOT", spec["kokkos"].prefix),
            self.define("KokkosKernels_ROOT", spec["kokkos-kernels"].prefix),
        ]
        args.append(self.define("CMAKE_CXX_COMPILER", self._cxx_compiler()))
        if self.run_tests:
            args.extend(self._mpiexec_args())
        return args

    def _cxx_compiler(self):
        """Device code is compiled by the compiler Kokkos was built for, chosen the way
        kokkos-kernels chooses it: hipcc for ^kokkos+rocm (unless Kokkos was built by a
        HIP-capable clang), else kokkos_cxx (nvcc_wrapper for +cuda, the C++ compiler)."""
        spec = self.spec
        if spec.satisfies("^kokkos+rocm") and not (
            spec.satisfies("^kokkos %cxx=clang") or spec.satisfies("^kokkos %cxx=rocmcc")
        ):
            return spec["hip"].hipcc
        return self["kokkos"].kokkos_cxx

    def _no_device(self):
        """Why a device build's programs cannot run here (no driver, no device), else None;
        like tests/support/device_probe.c."""
        import ctypes

        if self.spec.satisfies("+cuda"):
            lib, init, count, no_device = "libcuda.so.1", "cuInit", "cuDeviceGetCount", (34, 100)
        elif self.spec.satisfies("+rocm"):
            lib, init, count, no_device = "libamdhip64.so", None, "hipGetDeviceCount", (100,)
        else:
            return None
        try:
            driver = ctypes.CDLL(lib)
        except OSError as e:
            return f"no driver on this machine ({e})"
        n = ctypes.c_int(0)
        rc = getattr(driver, init)(0) if init else 0
        rc = rc or getattr(driver, count)(ctypes.byref(n))
        if rc in no_device or (rc == 0 and n.value == 0):
            return f"the driver sees no device ({lib}: error {rc}, {n.value} devices)"
        return None

    def _mpiexec_args(self):
        mpiexec = join_path(self.spec["mpi"].prefix.bin, "mpiexec")
        args = [self.define("MPIEXEC_EXECUTABLE", mpiexec), self.define("MPIEXEC_NUMPROC_FLAG", "-n")]
        if self.spec.satisfies("^openmpi"):
            args.append(self.define("MPIEXEC_PREFLAGS", "--oversubscribe"))
        return args

    def check(self):
        with working_dir(self.build_directory):
            ctest("--output-on-failure", "-j", str(make_jobs))

    def test_plan(self):
        """plan the bundled ResNet-50 with every planner"""
        omgs_plan = which(self.prefix.bin.join("omgs-plan"))
        model = join_path(self.prefix.share, "omgs", "models", "resnet50.csv")
        out = omgs_plan("--model", model, "--workers", "16", "--density", "0.001",
                        "--planner", "all", output=str.split, error=str.split)
        assert "optimal" in out

    def test_consumer_two_ranks(self):
        """build downstream CMake projects (C++ only, C only) against the install, 2 ranks"""
        src = join_path(self.test_suite.current_test_cache_dir, "tests", "consumer")
        cmake = which(self.spec["cmake"].prefix.bin.cmake)
        mpiexec = which(join_path(self.spec["mpi"].prefix.bin, "mpiexec"))
        model = join_path(self.prefix.share, "omgs", "models", "resnet50.csv")
        shapes = [("cxx", "omgs-consumer", "planned 161 tensors"), ("c", "omgs-consumer-c", "0 wrong")]
        for shape, _, _ in shapes:
            with working_dir(f"consumer-{shape}", create=True):
                cmake(join_path(src, shape), f"-DCMAKE_PREFIX_PATH={self.prefix}",
                      f"-DCMAKE_CXX_COMPILER={self._cxx_compiler()}")
                cmake("--build", ".")
        if self._no_device():  # built, but cannot run here
            raise SkipTest(self._no_device())
        for shape, program, expect in shapes:
            with working_dir(f"consumer-{shape}"):
                out = mpiexec("-n", "2", f"./{program}", model, output=str, error=str)
                assert "rank 1 of 2" in out and expect in out, out

    def test_train_synthetic(self):
        """run the example training job (ResNet-50 shapes, shrunk) on 2 ranks"""
        if not self.spec.satisfies("+examples"):
            raise SkipTest("built without +examples")
        if self._no_device():
            raise SkipTest(self._no_device())
        mpiexec = which(join_path(self.spec["mpi"].prefix.bin, "mpiexec"))
        job = self.prefix.bin.join("omgs-train-synthetic")
        out = mpiexec("-n", "2", job, "--model", "resnet50", "--numel-scale", "0.02",
                      "--iterations", "2", "--warmup", "1", output=str.split, error=str.split)
        assert "speedup_vs_dense" in out

    def test_train_mlp(self):
        """train the example MLP with top-k SGD and dense SGD on 2 ranks; PASS expected"""
        if not self.spec.satisfies("+examples"):
            raise SkipTest("built without +examples")
        if self._no_device():
            raise SkipTest(self._no_device())
        mpiexec = which(join_path(self.spec["mpi"].prefix.bin, "mpiexec"))
        out = mpiexec("-n", "2", self.prefix.bin.join("omgs-train-mlp"), "--epochs", "3",
                      "--samples", "1024", output=str.split, error=str.split)
        assert "PASS" in out

    test_requires_compiler = True  # the consumer projects are compiled

    @run_after("install")
    def cache_test_sources(self):
        cache_extra_test_sources(self, [join_path("tests", "consumer")])
