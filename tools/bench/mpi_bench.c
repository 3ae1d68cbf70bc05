/* The Open MPI anchor of tools/bench/compare.py: the same sweep as hvd_bench
 * (sizes, iterations, per-call timing, median on rank 0, nccl-tests bus
 * factors), float32 sum, over MPI's own collectives:
 *
 *   mpicc -O2 -o mpi_bench mpi_bench.c
 *   mpirun --allow-run-as-root -np 2 ./mpi_bench -b 8 -e 256M -n 50 -w 5 \
 *       --ops allreduce,allgather,broadcast,alltoall,reducescatter --csv F
 *
 * Allreduce runs in place (MPI_IN_PLACE), like hvd_bench. Sizes are
 * nccl-tests' "size" (see hvd_bench.cc). Each timed call is bracketed by
 * nothing but the call itself; a barrier separates sizes. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

int main(int argc, char** argv) {
  size_t begin = 8, end = (size_t)256 << 20, budget = (size_t)2 << 30;
  double factor = 2;
  int iters = 50, warmup = 5;
  const char* ops = "allreduce";
  const char* csv_path = NULL;
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) begin = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-e")) end = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-f")) factor = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-w")) warmup = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--ops")) ops = argv[i + 1];
    else if (!strcmp(argv[i], "--budget")) budget = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "--csv")) csv_path = argv[i + 1];
    else {
      if (rank == 0) fprintf(stderr, "mpi_bench: unknown flag %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  FILE* csv = NULL;
  if (rank == 0 && csv_path != NULL) {
    csv = fopen(csv_path, "w");
    fprintf(csv, "system,op,bytes,count,dtype,redop,ranks,iters,median_us,"
                 "min_us,algbw_gbs,busbw_gbs,wrong\n");
  }
  char* list = strdup(ops);
  int failed = 0;
  for (char* op = strtok(list, ","); op != NULL; op = strtok(NULL, ",")) {
    for (double s = (double)begin; s <= (double)end * 1.0000001; s *= factor) {
      size_t bytes = (size_t)s;
      int whole = !strcmp(op, "allreduce") || !strcmp(op, "broadcast");
      size_t count = whole ? bytes / 4 : bytes / 4 / n; /* per rank block */
      if (count == 0) continue;
      size_t moved = whole ? count * 4 : count * 4 * n;
      size_t in_count = whole || !strcmp(op, "allgather") ? count : count * n;
      size_t out_count = whole ? count : (!strcmp(op, "reducescatter") ? count
                                                                        : count * n);
      float* in = malloc(in_count * 4);
      float* out = malloc(out_count * 4);
      for (size_t i = 0; i < in_count; ++i) in[i] = (float)(rank + 1);
      memset(out, 0, out_count * 4);
      int it = (int)(budget / moved);
      if (it > iters) it = iters;
      if (it < 3) it = 3;
      double* t = malloc(sizeof(double) * it);
      double bus = !strcmp(op, "allreduce") ? 2.0 * (n - 1) / n
                   : !strcmp(op, "broadcast") ? 1.0 : (double)(n - 1) / n;
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = -warmup; i < it; ++i) {
        double t0 = MPI_Wtime();
        if (!strcmp(op, "allreduce")) {
          MPI_Allreduce(MPI_IN_PLACE, in, (int)count, MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD);
        } else if (!strcmp(op, "broadcast")) {
          MPI_Bcast(in, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        } else if (!strcmp(op, "allgather")) {
          MPI_Allgather(in, (int)count, MPI_FLOAT, out, (int)count, MPI_FLOAT,
                        MPI_COMM_WORLD);
        } else if (!strcmp(op, "alltoall")) {
          MPI_Alltoall(in, (int)count, MPI_FLOAT, out, (int)count, MPI_FLOAT,
                       MPI_COMM_WORLD);
        } else if (!strcmp(op, "reducescatter")) {
          MPI_Reduce_scatter_block(in, out, (int)count, MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD);
        } else {
          if (rank == 0) fprintf(stderr, "mpi_bench: unknown op %s\n", op);
          MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (i >= 0) t[i] = (MPI_Wtime() - t0) * 1e6;
      }
      qsort(t, it, sizeof(double), cmp_double);
      double median = it % 2 ? t[it / 2] : (t[it / 2 - 1] + t[it / 2]) / 2;
      if (rank == 0) {
        double algbw = moved / median / 1e3;
        printf("  %-13s %12zu %12zu %11.1f %11.1f %10.3f %10.3f\n", op, moved,
               count, median, t[0], algbw, algbw * bus);
        fflush(stdout);
        if (csv != NULL) {
          fprintf(csv, "mpi,%s,%zu,%zu,float32,sum,%d,%d,%.2f,%.2f,%.4f,%.4f,"
                       "0\n", op, moved, count, n, it, median, t[0], algbw,
                  algbw * bus);
          fflush(csv);
        }
      }
      free(t);
      free(in);
      free(out);
    }
  }
  free(list);
  if (csv != NULL) fclose(csv);
  MPI_Finalize();
  return failed;
}
