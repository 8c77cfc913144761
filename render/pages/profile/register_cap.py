"""Register caps: whether capping registers could add a block per SM to our kernel."""
from __future__ import annotations

from ...fmt import known
from ...vocab import plural
from .data import ProfileData, shape_list


class RegisterCaps(ProfileData):
    """The register-cap note, from our kernel's own block limits."""

    def register_cap_note(self) -> str:
        """Whether capping registers could add a block per SM to our kernel, from its own block limits:
        only where registers, not shared memory, set how many blocks fit."""
        rows = []
        for shape in self.limiter_shapes() or ([self.headline] if self.headline else []):
            k = self._triton_kernel(shape)
            if k is None or not (known(k.get("block_limit_registers")) and known(k.get("block_limit_smem"))):
                continue
            rows.append((shape, int(k["block_limit_registers"]), int(k["block_limit_smem"])))
        if not rows:
            return "This run's profile has no block limits for our kernel, so whether a register cap could help is not known."
        bound = [(s, r, m) for s, r, m in rows if m <= r]
        free = [(s, r, m) for s, r, m in rows if m > r]
        out = []
        if bound:
            counts = {(r, m) for _, r, m in bound}
            tail = (f": shared memory allows {plural(next(iter(counts))[1], 'block')} per SM and registers "
                    f"{next(iter(counts))[0]}" if len(counts) == 1 else "")
            out.append(f"At {shape_list(self.shape_text(s) for s, _, _ in bound)}, our kernel's shared memory allows no "
                       f"more blocks per SM than its registers do{tail}, so no register cap (`maxnreg`) could put "
                       "another block on an SM. The register-cap experiment of earlier runs is therefore not run: it "
                       "could not answer its question on the kernel that ships.")
        for s, r, m in free:
            out.append(f"At {shape_list([self.shape_text(s)])}, registers allow {plural(r, 'block')} per SM and shared memory {m}: "
                       "a register cap could add a block there, and this run does not test whether it would help.")
        return " ".join(out)
