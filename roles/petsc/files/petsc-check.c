/* petsc-check: solve a 1-D Poisson problem with PETSc's KSP across MPI ranks and print how close
 * the answer is. Installed by the ptc petsc role as proof that the PETSc it installed compiles,
 * links and solves: `mpirun -np N petsc-check [-n SIZE] [-ksp_type cg] [-pc_type jacobi]`.
 * Prints "petsc-check: PETSc VERSION, ranks N, unknowns M, KSP TYPE/PC TYPE, iterations I,
 * error E"; the exact solution is all ones, so E is the 2-norm of the error. */
#include <petscksp.h>

int main(int argc, char **argv)
{
  Vec         x, b, exact;
  Mat         A;
  KSP         ksp;
  PC          pc;
  KSPType     ksp_type;
  PCType      pc_type;
  PetscInt    i, n = 1000, iterations, first, last;
  PetscReal   error;
  PetscMPIInt ranks;
  char        version[128];

  PetscCall(PetscInitialize(&argc, &argv, NULL, NULL));
  PetscCall(PetscOptionsGetInt(NULL, NULL, "-n", &n, NULL));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &ranks));
  PetscCall(PetscGetVersion(version, sizeof version));

  PetscCall(MatCreateAIJ(PETSC_COMM_WORLD, PETSC_DECIDE, PETSC_DECIDE, n, n, 3, NULL, 1, NULL, &A));
  PetscCall(MatGetOwnershipRange(A, &first, &last));
  for (i = first; i < last; i++) {
    if (i > 0) PetscCall(MatSetValue(A, i, i - 1, -1.0, INSERT_VALUES));
    if (i < n - 1) PetscCall(MatSetValue(A, i, i + 1, -1.0, INSERT_VALUES));
    PetscCall(MatSetValue(A, i, i, 2.0, INSERT_VALUES));
  }
  PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));

  PetscCall(MatCreateVecs(A, &x, &b));
  PetscCall(VecDuplicate(x, &exact));
  PetscCall(VecSet(exact, 1.0));
  PetscCall(MatMult(A, exact, b));

  PetscCall(KSPCreate(PETSC_COMM_WORLD, &ksp));
  PetscCall(KSPSetOperators(ksp, A, A));
  PetscCall(KSPSetType(ksp, KSPCG));
  PetscCall(KSPSetTolerances(ksp, 1e-10, PETSC_DEFAULT, PETSC_DEFAULT, 10 * n));
  PetscCall(KSPSetFromOptions(ksp));
  PetscCall(KSPSolve(ksp, b, x));

  PetscCall(VecAXPY(x, -1.0, exact));
  PetscCall(VecNorm(x, NORM_2, &error));
  PetscCall(KSPGetIterationNumber(ksp, &iterations));
  PetscCall(KSPGetType(ksp, &ksp_type));
  PetscCall(KSPGetPC(ksp, &pc));
  PetscCall(PCGetType(pc, &pc_type));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD,
                        "petsc-check: %s, ranks %d, unknowns %" PetscInt_FMT ", KSP %s/PC %s, "
                        "iterations %" PetscInt_FMT ", error %g\n",
                        version, ranks, n, ksp_type, pc_type, iterations, (double)error));

  PetscCall(KSPDestroy(&ksp));
  PetscCall(VecDestroy(&x));
  PetscCall(VecDestroy(&b));
  PetscCall(VecDestroy(&exact));
  PetscCall(MatDestroy(&A));
  PetscCall(PetscFinalize());
  return 0;
}
