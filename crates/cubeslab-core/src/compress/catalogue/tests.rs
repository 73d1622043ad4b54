use super::*;

#[test]
fn names_round_trip() {
    for text in [
        "none",
        "zstd:3",
        "zstd:19",
        "gzip:1",
        "blosc-lz4:5",
        "blosc-zstd:5,shuffle=bit",
        "blosc-zstd:1,shuffle=none",
        "bitround:12,zstd=3",
        "zfp:tolerance=0.01",
        "zfp:precision=16",
        "zfp:rate=4",
        "zfp:reversible",
        "zfp:snr=40",
        "zfp:max-error=0.5%",
        "zfp:max-error=2",
        "zfp:minbits=1,maxbits=300,maxprec=64,minexp=-10",
    ] {
        let c = Compression::parse(text).unwrap();
        assert_eq!(c.name(), text, "{c:?}");
        assert_eq!(Compression::parse(&c.name()).unwrap(), c);
    }
    assert_eq!(Compression::parse("zstd").unwrap().name(), "zstd:3");
    assert_eq!(Compression::parse("gzip").unwrap().name(), "gzip:5");
}

#[test]
fn bad_names_say_what_is_wrong() {
    for (text, says) in [
        ("lzma", "unknown compression"),
        ("zstd:fast", "level must be an integer"),
        ("gzip:12", "level must be an integer 0..9"),
        ("blosc-lz4:5,shuffle=twice", "shuffle must be"),
        ("zfp", "zfp needs a mode"),
        ("zfp:tolerance=-1", "tolerance must be a positive number"),
        ("zfp:rate=4,speed=9", "unknown option \"speed\""),
        ("zfp:max-error=abc", "max-error must be"),
        ("bitround", "bitround needs"),
    ] {
        let e = Compression::parse(text).unwrap_err();
        assert!(e.contains(says), "{text}: {e}");
    }
}

#[test]
fn chains_are_valid_zarr_codecs() {
    use zarrs::{array::CodecChain, metadata::v3::MetadataV3};
    for text in [
        "none",
        "zstd:3",
        "gzip:5",
        "blosc-lz4",
        "blosc-zstd:5,shuffle=bit",
        "bitround:10",
        "zfp:tolerance=0.01",
        "zfp:precision=12",
        "zfp:rate=4",
        "zfp:reversible",
        "zfp:minbits=1,maxbits=300,maxprec=64,minexp=-10",
    ] {
        let codecs = Compression::parse(text)
            .unwrap()
            .codecs(DType::Float32)
            .unwrap();
        let metas: Vec<MetadataV3> =
            serde_json::from_value(Value::Array(codecs)).expect("metadata");
        CodecChain::from_metadata(&metas).unwrap_or_else(|e| panic!("{text}: {e}"));
        let c = Compression::parse(text).unwrap();
        let back = Compression::from_codecs(&c.codecs(DType::Float32).unwrap());
        assert_eq!(back, Some(c), "{text}");
    }
    assert!(Compression::parse("zfp:snr=40")
        .unwrap()
        .codecs(DType::Float32)
        .is_err());
    assert!(Compression::parse("zfp:rate=4")
        .unwrap()
        .codecs(DType::Int16)
        .is_err());
    assert!(Compression::parse("bitround:4")
        .unwrap()
        .codecs(DType::UInt16)
        .is_err());
}

#[test]
fn zfp_on_integers_takes_only_the_modes_that_keep_small_values() {
    for dtype in [DType::Int32, DType::Int64] {
        for text in ["zfp:rate=8", "zfp:reversible"] {
            let zfp = Compression::parse(text).unwrap();
            assert!(zfp.check_dtype(dtype).is_ok(), "{text} on {dtype:?}");
        }
        for text in ["zfp:tolerance=0.5", "zfp:precision=16"] {
            let refusal = Compression::parse(text).unwrap().check_dtype(dtype);
            assert!(refusal.unwrap_err().contains("zfp:rate=N"), "{text}");
        }
    }
}
