use super::*;
use crate::gpu::kernels::tests::{declared_kernels, declared_params, run_on_cpu};
use systole_core::conv;
use systole_core::params::SplitMix64;

fn random(rng: &mut SplitMix64, n: usize) -> Vec<f32> {
    (0..n).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect()
}

/// Values on a coarse grid, so pooling windows hold ties, with a NaN or two.
fn tied(rng: &mut SplitMix64, n: usize, nans: usize) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n).map(|_| rng.below(4) as f32 - 1.5).collect();
    for _ in 0..nans {
        x[rng.below(n as u64) as usize] = f32::NAN;
    }
    x
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

fn convs() -> Vec<ConvGeometry> {
    [
        ((1, 8, 8), 4, 3, 1, 1),
        ((3, 7, 6), 2, 3, 2, 1),
        ((2, 5, 5), 3, 5, 1, 2),
        ((4, 6, 9), 5, 2, 3, 0),
        ((1, 28, 28), 6, 5, 1, 2),
    ]
    .into_iter()
    .map(|(chw, out, k, s, p)| ConvGeometry::new(chw, out, k, s, p).unwrap())
    .collect()
}

fn pools() -> Vec<PoolGeometry> {
    [((2, 8, 8), 2, 2), ((3, 7, 5), 3, 2), ((1, 6, 6), 2, 1), ((2, 9, 7), 3, 3)]
        .into_iter()
        .map(|(chw, k, s)| PoolGeometry::new(chw, k, s).unwrap())
        .collect()
}

#[test]
fn every_image_kernel_has_its_signature_in_the_source() {
    let named: Vec<String> = ALL.iter().map(|k| k.name.to_string()).collect();
    assert_eq!(declared_kernels(SOURCE), named, "kernels in SOURCE vs the table ALL");
    for k in ALL {
        let params = declared_params(SOURCE, k.name).expect("declared");
        assert_eq!(params, k.params, "{}: the source's parameters vs the launch's", k.name);
    }
    for (open, close) in [('{', '}'), ('(', ')'), ('[', ']')] {
        assert_eq!(SOURCE.matches(open).count(), SOURCE.matches(close).count(), "{open}{close}");
    }
}

/// The twins compute what core's reference image ops compute, bit for bit (sums included:
/// every one is in the reference's order).
#[test]
fn twins_equal_the_reference_image_ops_bit_for_bit() {
    let mut rng = SplitMix64(21);
    for g in convs() {
        for n in [1, 3] {
            let x = random(&mut rng, n * g.image());
            let mut cols = vec![f32::NAN; n * g.positions() * g.patch()];
            im2col(&g, n, &x, &mut cols);
            assert_eq!(bits(&cols), bits(&conv::im2col(&g, &x, n)), "im2col {g:?}, n {n}");
            let d = random(&mut rng, cols.len());
            let mut dx = vec![f32::NAN; x.len()];
            col2im(&g, n, &d, &mut dx);
            assert_eq!(bits(&dx), bits(&conv::col2im(&g, &d, n)), "col2im {g:?}, n {n}");
        }
    }
    for g in pools() {
        for (n, nans) in [(1, 0), (2, 0), (3, 2)] {
            let x = tied(&mut rng, n * g.image(), nans);
            let (want, at) = conv::max_pool(&g, &x, n);
            let mut y = vec![0.0; want.len()];
            max_pool(&g, n, &x, &mut y);
            assert_eq!(bits(&y), bits(&want), "max_pool {g:?}, n {n}");
            let dy = random(&mut rng, y.len());
            let mut dx = vec![f32::NAN; x.len()];
            max_pool_grad(&g, n, &dy, &x, &mut dx);
            assert_eq!(bits(&dx), bits(&conv::max_pool_grad(&g, &dy, &at, n)), "max grad {g:?}");
            let x = random(&mut rng, n * g.image());
            let mut y = vec![0.0; g.out_image() * n];
            avg_pool(&g, n, &x, &mut y);
            assert_eq!(bits(&y), bits(&conv::avg_pool(&g, &x, n)), "avg_pool {g:?}, n {n}");
            let mut dx = vec![f32::NAN; x.len()];
            avg_pool_grad(&g, n, &dy, &mut dx);
            assert_eq!(bits(&dx), bits(&conv::avg_pool_grad(&g, &dy, n)), "avg grad {g:?}");
        }
    }
}

/// The CUDA source, compiled as C++ for the CPU and run thread by thread in blocks of 256,
/// gives the twins' results bit for bit.
#[test]
fn image_kernels_compiled_for_the_cpu_equal_the_twins() {
    let mut rng = SplitMix64(22);
    let cg = ConvGeometry::new((3, 7, 6), 2, 3, 2, 1).unwrap();
    let pg = PoolGeometry::new((2, 7, 5), 3, 2).unwrap();
    let (cn, pn) = (2usize, 3usize);
    let x = random(&mut rng, cn * cg.image());
    let d = random(&mut rng, cn * cg.positions() * cg.patch());
    let px = tied(&mut rng, pn * pg.image(), 3);
    let pdy = random(&mut rng, pn * pg.out_image());
    let mut input = Vec::new();
    for v in conv_args(&cg, cn).into_iter().chain(pool_args(&pg, pn)) {
        input.extend(v.to_le_bytes());
    }
    for arr in [&x, &d, &px, &pdy] {
        input.extend(arr.iter().flat_map(|f| f.to_le_bytes()));
    }
    let Some(out) = run_on_cpu(&format!("{SOURCE}\n{DRIVER}"), &input) else { return };
    let mut words = out.into_iter();
    let mut take = |len: usize| -> Vec<u32> { words.by_ref().take(len).collect() };

    let mut cols = vec![0.0; d.len()];
    im2col(&cg, cn, &x, &mut cols);
    assert_eq!(take(cols.len()), bits(&cols), "im2col");
    let mut dx = vec![0.0; x.len()];
    col2im(&cg, cn, &d, &mut dx);
    assert_eq!(take(dx.len()), bits(&dx), "col2im");
    let mut y = vec![0.0; pdy.len()];
    max_pool(&pg, pn, &px, &mut y);
    assert_eq!(take(y.len()), bits(&y), "max_pool");
    let mut pdx = vec![0.0; px.len()];
    max_pool_grad(&pg, pn, &pdy, &px, &mut pdx);
    assert_eq!(take(pdx.len()), bits(&pdx), "max_pool_grad");
    avg_pool(&pg, pn, &px, &mut y);
    assert_eq!(take(y.len()), bits(&y), "avg_pool");
    avg_pool_grad(&pg, pn, &pdy, &mut pdx);
    assert_eq!(take(pdx.len()), bits(&pdx), "avg_pool_grad");
    assert!(take(1).is_empty(), "the driver wrote more than expected");
}

/// Runs each image kernel over a grid of 256-thread blocks (the shim's `launch`), reading
/// in.bin, writing out.bin.
const DRIVER: &str = r#"
int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    if (!in) return 3;
    int cv[9], pv[8];
    if (std::fread(cv, 4, 9, in) != 9 || std::fread(pv, 4, 8, in) != 8) return 4;
    int n = cv[0], c = cv[1], h = cv[2], w = cv[3], oh = cv[4], ow = cv[5], k = cv[6], s = cv[7], p = cv[8];
    int pn = pv[0], pc = pv[1], ph = pv[2], pw = pv[3], poh = pv[4], pow_ = pv[5], pk = pv[6], ps = pv[7];
    auto read = [&](size_t len) { std::vector<float> v(len); if (std::fread(v.data(), 4, len, in) != len) std::exit(5); return v; };
    int image = n * h * w * c, cols_len = n * oh * ow * k * k * c;
    int pimage = pn * ph * pw * pc, pout = pn * poh * pow_ * pc;
    std::vector<float> x = read(image), d = read(cols_len), px = read(pimage), pdy = read(pout);
    FILE* out = std::fopen(argv[2], "wb");
    if (!out) return 7;
    auto write = [&](const std::vector<float>& v) { std::fwrite(v.data(), 4, v.size(), out); };
    std::vector<float> cols(cols_len), dx(image), y(pout), pdx(pimage);
    launch(cols_len, [&] { systole_im2col(x.data(), cols.data(), n, c, h, w, oh, ow, k, s, p); });
    write(cols);
    launch(image, [&] { systole_col2im(d.data(), dx.data(), n, c, h, w, oh, ow, k, s, p); });
    write(dx);
    launch(pout, [&] { systole_max_pool(px.data(), y.data(), pn, pc, ph, pw, poh, pow_, pk, ps); });
    write(y);
    launch(pimage, [&] { systole_max_pool_grad(pdy.data(), px.data(), pdx.data(), pn, pc, ph, pw, poh, pow_, pk, ps); });
    write(pdx);
    launch(pout, [&] { systole_avg_pool(px.data(), y.data(), pn, pc, ph, pw, poh, pow_, pk, ps); });
    write(y);
    launch(pimage, [&] { systole_avg_pool_grad(pdy.data(), pdx.data(), pn, pc, ph, pw, poh, pow_, pk, ps); });
    write(pdx);
    std::fclose(out);
    return 0;
}
"#;
