"""A persistent kernel in the stream-K manner: a fixed number of programs, each walking the
tiles ``pid, pid + num_programs, ...`` with a ``while`` loop over a local cursor.

Expected: verified (Y = 2 * X; the loop ends for every program at the reduced sizes).
"""
import tilelang
import tilelang.language as T


def ref_program(X):
    return X * 2


@tilelang.jit(out_idx=[1])
def doubled_persistent(N, block_N, num_programs, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(num_programs, threads=128) as pid:
            cursor = T.alloc_fragment((1,), T.int32, "local")
            cursor[0] = pid
            while cursor[0] < T.ceildiv(N, block_N):
                for j in T.Parallel(block_N):
                    Y[cursor[0] * block_N + j] = X[cursor[0] * block_N + j] * 2
                cursor[0] = cursor[0] + num_programs

    return main


def main():
    kernel = doubled_persistent(1000, 64, 4)
    kernel.get_profiler().assert_allclose(ref_program, rtol=1e-6, atol=1e-6)


if __name__ == "__main__":
    main()
